"""Check the torch bridge against torch on torch's own OpInfo samples: each sample runs
forward and backward twice, natively and under ``ampref.torch.emulate(fallback="error")``
(optionally both inside autocast: torch's and ampref's), logged aten op by aten op with
every output's dtype and strides (of dimensions longer than 1). The logs must be equal
(TRC-EMU-001, TRC-EMU-005, TRC-AUT-001). Each sample runs as given and with its floating
operands and incoming gradients in reversed memory layout, where the meta device and
torch's CPU kernels disagree most.

Usage: ``python scripts/opinfo_survey.py [--autocast bfloat16|float16] [--out results.json]
[NAME ...]``. The samples come from ``torch.testing._internal`` (torch's test suite, which
needs the ``expecttest`` package; not an ampref dependency). Reports, per op, the first
differing log entry, and errors other than ampref's refusal of an op without a
reference (``UnsupportedOpError``). Results of a run are kept in
``docs/bridge-models.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import ampref.torch as at
from ampref.common.atomicio import atomic_write

# the op log of the real-model check beside this file (the scripts are not a package)
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bridge_models import OpLog  # noqa: E402

AUTOCAST = ("bfloat16", "float16")
#: a sample: (op name, dtype name, a callable making (fn, input, args, kwargs) afresh)
Sample = tuple[str, str, Callable[[], tuple[Callable[..., Any], Any, tuple[Any, ...],
                                            dict[str, Any]]]]


def _fresh(x: Any, reverse: bool) -> Any:
    """A new leaf of ``x``'s values (requires_grad kept); floating tensors of two or more
    dims in reversed memory layout when ``reverse``; lists, tuples and dicts walked."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided:
        t = x.detach().clone()
        if reverse and t.is_floating_point() and t.dim() >= 2:
            back = tuple(reversed(range(t.dim())))
            t = t.permute(back).contiguous().permute(back)
        return t.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_fresh(v, reverse) for v in x)
    if isinstance(x, dict):
        return {k: _fresh(v, reverse) for k, v in x.items()}
    return x


def _grad_like(t: torch.Tensor, reverse: bool) -> torch.Tensor:
    return _fresh(torch.ones_like(t), reverse).detach()


def step(make: Callable[[], Any], reverse: bool, ours: bool, autocast: str | None) -> list[Any]:
    """The op log of one forward and backward of the sample ``make()`` gives."""
    fn, inp, args, kwargs = make()
    inp, args, kwargs = (_fresh(v, reverse) for v in (inp, args, kwargs))
    torch.manual_seed(0)
    with ExitStack() as stack:
        if ours:
            stack.enter_context(at.emulate(fallback="error"))
        log = stack.enter_context(OpLog(full=True))
        if autocast is not None:
            dt = getattr(torch, autocast)
            stack.enter_context(at.autocast("cpu", dt) if ours else torch.autocast("cpu", dt))
        y = fn(inp, *args, **kwargs)
        outs = [t for t in (y if isinstance(y, (list, tuple)) else [y])
                if isinstance(t, torch.Tensor) and t.requires_grad and t.is_floating_point()]
        if outs:
            torch.autograd.backward(outs, [_grad_like(t, reverse) for t in outs])
    return log.ops


@dataclass(frozen=True, kw_only=True)
class Finding:
    """One sample whose logs differ, or whose emulated run raised."""

    op: str
    dtype: str
    layout: str
    first: int | None = None
    torch: Any = None
    ampref: Any = None
    error: str | None = None


def compare(samples: Iterator[Sample], autocast: str | None = None) -> dict[str, Any]:
    """Run every sample both ways; count comparisons and refusals, list findings."""
    compared, refused, findings = 0, 0, []
    for op, dtype, make in samples:
        for layout in ("given", "reversed"):
            try:
                theirs = step(make, layout == "reversed", False, autocast)
            except Exception:  # noqa: BLE001 - a sample torch itself refuses is skipped
                continue
            try:
                ours = step(make, layout == "reversed", True, autocast)
            except Exception as e:  # noqa: BLE001 - the outcome is the record
                if type(e).__name__ == "UnsupportedOpError":
                    refused += 1
                else:
                    findings.append(Finding(op=op, dtype=dtype, layout=layout,
                                            error=f"{type(e).__name__}: {e}"[:300]))
                continue
            compared += 1
            if ours != theirs:
                i = next((k for k, (a, b) in enumerate(zip(theirs, ours, strict=False))
                          if a != b), min(len(theirs), len(ours)))
                findings.append(Finding(op=op, dtype=dtype, layout=layout, first=i,
                                        torch=theirs[i] if i < len(theirs) else None,
                                        ampref=ours[i] if i < len(ours) else None))
    return {"compared": compared, "refused": refused, "findings": findings}


def _maker(info: Any, sample: Any) -> Callable[[], tuple[Callable[..., Any], Any,
                                                         tuple[Any, ...], dict[str, Any]]]:
    return lambda: (info, sample.input, tuple(sample.args), dict(sample.kwargs))


def unknown_names(names: list[str], db: list[Any]) -> list[str]:
    """The requested op names no OpInfo entry of ``db`` carries (a misspelt name would
    otherwise run nothing and read as a clean survey)."""
    known = {info.name for info in db}
    return [n for n in names if n not in known]


#: --dtypes choices: the floating dtypes a sample can be made in
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
          "float64": torch.float64}


def opinfo_samples(names: list[str], db: list[Any], per_op: int = 3, first: int = 0,
                   dtypes: tuple[str, ...] = ("float32", "bfloat16")) -> Iterator[Sample]:
    """OpInfo samples ``first`` .. ``first + per_op - 1`` of each op of ``db`` (all ops
    when ``names`` is empty) in each of ``dtypes`` (keys of :data:`DTYPES`) the op
    supports on the CPU."""
    for info in db:
        if names and info.name not in names:
            continue
        for dtype in (DTYPES[d] for d in dtypes):
            if dtype not in info.supported_dtypes("cpu"):
                continue
            try:
                got = list(info.sample_inputs("cpu", dtype, requires_grad=info.supports_autograd))
            except Exception:  # noqa: BLE001 - an op whose samples cannot be made here
                continue
            for s in got[first:first + per_op]:
                yield info.name, str(dtype), _maker(info, s)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="OpInfo op names (default: all)")
    parser.add_argument("--autocast", help=f"run both sides in CPU autocast: {AUTOCAST}")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument("--per-op", type=int, default=3, help="samples per op and dtype")
    parser.add_argument("--first", type=int, default=0, help="index of the first sample")
    parser.add_argument("--dtypes", default="float32,bfloat16",
                        help=f"comma-separated sample dtypes: {', '.join(DTYPES)}")
    opts = parser.parse_args(argv)
    if opts.per_op < 1 or opts.first < 0:
        print(f"opinfo_survey: --per-op must be >= 1 and --first >= 0, got {opts.per_op} "
              f"and {opts.first}", file=sys.stderr)
        return 2
    dtypes = tuple(d.strip() for d in opts.dtypes.split(",") if d.strip())
    if not dtypes or any(d not in DTYPES for d in dtypes):
        print(f"opinfo_survey: --dtypes {opts.dtypes!r}: choose from {', '.join(DTYPES)}",
              file=sys.stderr)
        return 2
    if opts.autocast is not None and opts.autocast not in AUTOCAST:
        print(f"opinfo_survey: unknown --autocast {opts.autocast!r}; choices: {AUTOCAST}",
              file=sys.stderr)
        return 2
    from torch.testing._internal.common_methods_invocations import op_db
    unknown = unknown_names(opts.names, op_db)
    if unknown:
        print(f"opinfo_survey: unknown op name(s) {unknown}; torch {torch.__version__}'s "
              f"OpInfo database has {len(op_db)} entries (e.g. 'add', 'nn.functional.conv2d')",
              file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    result = compare(opinfo_samples(opts.names, op_db, opts.per_op, opts.first, dtypes),
                     opts.autocast)
    for f in result["findings"]:
        print(f"{f.op} {f.dtype} {f.layout}: " + (f.error or
              f"op {f.first}: torch {f.torch}, ampref {f.ampref}"))
    print(f"compared {result['compared']} runs, {result['refused']} refused (no reference), "
          f"{len(result['findings'])} findings")
    if opts.out:  # written whole or not at all: a failed write keeps the old file
        rows = [f.__dict__ for f in result["findings"]]
        atomic_write(opts.out, json.dumps({"torch": torch.__version__, "autocast": opts.autocast,
                                           **result, "findings": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
