"""Record what torch's CUDA autocast does to ops outside aten (torchvision's), without a GPU.

A CUDA build of torch dispatches *fake* CUDA tensors (``FakeTensorMode``) through the
real ``AutocastCUDA`` kernels when CUDA autocast is switched on by hand (``torch.autocast``
itself refuses without a device): the casts those kernels make and the dtypes that reach
the op are torch's and torchvision's own, read from their binaries. Each case logs, below
autocast, every aten / torchvision op with its floating inputs' and its outputs' dtypes;
then, unless ``--oracle-only``, the same call on real CPU tensors under
``ampref.torch.autocast("cuda")``, whose log must be equal (TRC-AUT-005).

Usage: ``python scripts/outside_autocast_record.py [--out F.json] [--oracle-only]``.
Needs a CUDA build of torch (no GPU) and torchvision with its compiled ops; the record
kept in ``tests/data/outside_autocast_cuda.json`` came from torch 2.14.1+cu130 and
torchvision 0.29.1+cu130 on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ampref.common.atomicio import atomic_write

Case = Callable[[str, torch.dtype], tuple[Any, tuple[Any, ...]]]


class DtypeLog(TorchDispatchMode):  # type: ignore[misc]
    """Each op below autocast: (name, floating inputs' dtype and shape, tensor outputs'
    dtypes). ``prim::`` queries are left out: fake tensors answer ``.to``'s device
    question through the dispatcher, real ones do not."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[list[Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        if func.namespace == "prim":
            return out
        flat = [*args, *(kwargs or {}).values()]
        ins = [[str(a.dtype), list(a.shape)] for a in flat if isinstance(a, torch.Tensor)
               and a.is_floating_point()]
        outs = out if isinstance(out, (list, tuple)) else [out]
        self.ops.append([func.name(), ins, [str(o.dtype) for o in outs
                                            if isinstance(o, torch.Tensor)]])
        return out


def _rand(dev: str, dtype: torch.dtype, *shape: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(sum(shape))
    return torch.rand(*shape, generator=g).to(device=dev, dtype=dtype)


def _rois(dev: str, dtype: torch.dtype) -> torch.Tensor:
    return torch.tensor([[0, 1.0, 1.0, 6.0, 6.0], [0, 0.0, 2.0, 5.0, 7.0]]).to(dev, dtype)


#: name -> builder of (op, args) on device ``dev`` with floating inputs in ``dtype``
CASES: dict[str, Case] = {
    "nms": lambda d, t: (torch.ops.torchvision.nms, (
        torch.tensor([[0, 0, 4.0, 4.0], [1, 1, 5.0, 5.0]]).to(d, t), _rand(d, t, 2), 0.5)),
    "roi_align": lambda d, t: (torch.ops.torchvision.roi_align, (
        _rand(d, t, 1, 4, 8, 8), _rois(d, t), 1.0, 2, 2, 2, True)),
    "roi_pool": lambda d, t: (torch.ops.torchvision.roi_pool, (
        _rand(d, t, 1, 4, 8, 8), _rois(d, t), 1.0, 2, 2)),
    "ps_roi_align": lambda d, t: (torch.ops.torchvision.ps_roi_align, (
        _rand(d, t, 1, 8, 8, 8), _rois(d, t), 1.0, 2, 2, 2)),
    "ps_roi_pool": lambda d, t: (torch.ops.torchvision.ps_roi_pool, (
        _rand(d, t, 1, 8, 8, 8), _rois(d, t), 1.0, 2, 2)),
    "deform_conv2d": lambda d, t: (torch.ops.torchvision.deform_conv2d, (
        _rand(d, t, 1, 2, 6, 6), _rand(d, t, 3, 2, 3, 3), _rand(d, t, 1, 18, 4, 4),
        _rand(d, t, 1, 9, 4, 4), _rand(d, t, 3), 1, 1, 0, 0, 1, 1, 1, 1, True)),
}

#: the inputs' dtype per case, and the region's lower-precision dtype
DTYPES = (("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float16"))


def on_fake_cuda(case: Case, dtype: torch.dtype, lower: torch.dtype) -> list[list[Any]]:
    """The case under torch's real CUDA autocast on fake CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()):  # nms has a data-dependent output size
        op, args = case("cuda", dtype)
        prev = torch.is_autocast_enabled("cuda"), torch.get_autocast_dtype("cuda")
        torch.set_autocast_enabled("cuda", True)
        torch.set_autocast_dtype("cuda", lower)
        torch.autocast_increment_nesting()
        try:
            with DtypeLog() as log:
                op(*args)
        finally:
            torch.autocast_decrement_nesting()
            torch.set_autocast_enabled("cuda", prev[0])
            torch.set_autocast_dtype("cuda", prev[1])
    return log.ops


def on_ampref(case: Case, dtype: torch.dtype, lower: torch.dtype) -> list[list[Any]]:
    """The case on CPU tensors under ``ampref.torch.autocast("cuda", lower)``."""
    import ampref.torch as at

    op, args = case("cpu", dtype)
    with at.autocast("cuda", lower), DtypeLog() as log:
        op(*args)
    return log.ops


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="write the record as JSON here")
    parser.add_argument("--oracle-only", action="store_true",
                        help="record torch's side only (no ampref comparison)")
    opts = parser.parse_args(argv)
    import torchvision

    rows, differ = [], 0
    for name, case in CASES.items():
        for dt, low in DTYPES:
            dtype, lower = getattr(torch, dt), getattr(torch, low)
            row: dict[str, Any] = {"op": f"torchvision::{name}", "inputs": dt, "lower": low,
                                   "cuda_autocast": on_fake_cuda(case, dtype, lower)}
            if not opts.oracle_only:
                row["ampref_equal"] = on_ampref(case, dtype, lower) == row["cuda_autocast"]
                differ += not row["ampref_equal"]
            rows.append(row)
            print(f"{name} {dt} (lower {low}): {row['cuda_autocast']}"
                  + ("" if opts.oracle_only else f" ampref equal: {row['ampref_equal']}"))
    if opts.out:  # written whole or not at all
        atomic_write(opts.out, json.dumps({
            "torch": torch.__version__, "torchvision": torchvision.__version__,
            "cuda_available": torch.cuda.is_available(), "cases": rows}, indent=1))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
