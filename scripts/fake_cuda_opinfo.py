"""ampref's CUDA autocast lists op by op against torch's real CUDA autocast, on torch's
OpInfo samples, without a GPU (TRC-AUT-002).

Each sample's forward call runs twice: on fake CUDA tensors through torch's real
``AutocastCUDA`` kernels (CUDA autocast switched on by hand; see
``scripts/fake_cuda_autocast.py``), and on CPU tensors under
``ampref.torch.autocast("cuda", dtype)``. Compared: the casts between floating dtypes in
order, the policy-listed ops' dtypes, and the dtypes of the call's results. Samples
torch cannot run on fake tensors (data-dependent shapes, kernels that ask the driver)
are counted, not compared; so are samples whose CPU kernel has no float16/bfloat16
version (a CPU gap, not a cast decision).

Usage: ``python scripts/fake_cuda_opinfo.py [--per-op N] [--dtypes float32,float16]
[--out F.json] [NAME ...]``. Needs a CUDA build of torch (no GPU) and ``expecttest``
(torch's OpInfo database).
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

from ampref.common.atomicio import atomic_write

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_cuda_autocast import (  # noqa: E402
    OpLog,
    compared,
    cuda_autocast_on,
    listed_ops,
)

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
REGIONS = (torch.float16, torch.bfloat16)
#: messages of CPU kernels without a 16-bit version
CPU_GAPS = ("not implemented for 'Half'", "not implemented for 'BFloat16'")


def _placed(x: Any, fake: Any) -> Any:
    """``x`` with every strided tensor a fresh copy: on the CPU, or fake on CUDA."""
    if isinstance(x, torch.Tensor) and x.layout == torch.strided:
        t = x.detach().clone()
        if fake is not None:
            t = fake.from_tensor(t).to("cuda")
        return t.requires_grad_(x.requires_grad) if t.is_floating_point() else t
    if isinstance(x, (list, tuple)):
        return type(x)(_placed(v, fake) for v in x)
    if isinstance(x, dict):
        return {k: _placed(v, fake) for k, v in x.items()}
    return x


def _dtypes(out: Any) -> list[str]:
    outs = out if isinstance(out, (list, tuple)) else [out]
    return [str(o.dtype)[6:] for o in outs if isinstance(o, torch.Tensor)]


def _run(info: Any, sample: Any, region: Any, fake: Any) -> dict[str, Any]:
    args = _placed((sample.input, *sample.args), fake)
    kwargs = _placed(dict(sample.kwargs), fake)
    with region, OpLog() as log:
        out = info.op(*args, **kwargs)
    return {**compared(log.ops, listed_ops()), "result": _dtypes(out)}


def one(info: Any, sample: Any, lower: torch.dtype) -> str | dict[str, Any]:
    """"equal", a skip reason, or the two sides where they differ."""
    import ampref.torch as at
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    try:
        with mode:
            theirs = _run(info, sample, cuda_autocast_on(lower), mode)
    except Exception as e:  # noqa: BLE001 - what fake tensors cannot run is counted
        return f"fake: {type(e).__name__}"
    try:
        ours = _run(info, sample, at.autocast("cuda", lower), None)
    except Exception as e:  # noqa: BLE001 - a refusal where torch ran is a finding
        if any(g in str(e) for g in CPU_GAPS):
            return "cpu kernel without 16-bit"
        return {"error": f"{type(e).__name__}: {e}"[:300]}
    theirs, ours = json.loads(json.dumps(theirs)), json.loads(json.dumps(ours))
    return "equal" if theirs == ours else {"cuda": theirs, "ampref": ours}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="OpInfo op names (default: all)")
    parser.add_argument("--per-op", type=int, default=2, help="samples per op and dtype")
    parser.add_argument("--dtypes", default="float32,float16",
                        help=f"comma-separated sample dtypes: {', '.join(DTYPES)}")
    parser.add_argument("--out", help="write the findings and counts as JSON here")
    opts = parser.parse_args(argv)
    dtypes = [d.strip() for d in opts.dtypes.split(",") if d.strip()]
    if opts.per_op < 1 or not dtypes or any(d not in DTYPES for d in dtypes):
        print(f"fake_cuda_opinfo: --per-op >= 1 and --dtypes from {list(DTYPES)}, got "
              f"{opts.per_op} and {opts.dtypes!r}", file=sys.stderr)
        return 2
    from torch.testing._internal.common_methods_invocations import op_db
    known = {i.name for i in op_db}
    if any(n not in known for n in opts.names):
        print(f"fake_cuda_opinfo: unknown op name(s) "
              f"{[n for n in opts.names if n not in known]}", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    counts: dict[str, int] = {}
    findings = []
    for info in op_db:
        if opts.names and info.name not in opts.names:
            continue
        for d in dtypes:
            if DTYPES[d] not in info.supported_dtypes("cpu"):
                continue
            try:
                samples = list(info.sample_inputs("cpu", DTYPES[d]))[:opts.per_op]
            except Exception:  # noqa: BLE001 - an op whose samples cannot be made here
                continue
            for i, s in enumerate(samples):
                for lower in REGIONS:
                    got = one(info, s, lower)
                    key = got if isinstance(got, str) else "finding"
                    counts[key] = counts.get(key, 0) + 1
                    if not isinstance(got, str):
                        findings.append({"op": info.name, "dtype": d, "sample": i,
                                         "region": str(lower)[6:], **got})
                        print(f"{info.name} {d} sample {i} in {str(lower)[6:]}: "
                              f"{json.dumps(got)[:400]}", flush=True)
    print(json.dumps(counts))
    if opts.out:  # written whole or not at all
        atomic_write(opts.out, json.dumps({"torch": torch.__version__, "counts": counts,
                                           "findings": findings}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
