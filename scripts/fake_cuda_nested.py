"""Record what torch's CUDA autocast does where code switches it off inside a region,
without a GPU (TRC-AUT-006).

A CUDA build of torch runs fake CUDA tensors (``FakeTensorMode``) through its real
``AutocastCUDA`` kernels once CUDA autocast is switched on by hand; inside, the cases of
``tests/bridge/nested_cases.py`` use torch's own ``torch.autocast("cuda",
enabled=False)``, ``torch.cuda.amp.autocast``, ``torch.amp.custom_fwd`` and a custom op's
``register_autocast``, and report the dtypes they see, in float16 and bfloat16 regions.
Unless ``--oracle-only``, the same cases then run on CPU tensors under
``ampref.torch.autocast("cuda")``, whose dtypes must be equal.

Usage: ``python scripts/fake_cuda_nested.py [--out F.json] [--oracle-only]``. Needs a CUDA
build of torch (no GPU); the record in ``tests/data/autocast_nested_fake_cuda.json`` came
from torch 2.14.1+cu130 on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from ampref.common.atomicio import atomic_write

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "bridge"), str(ROOT / "scripts")]

from fake_cuda_autocast import cuda_autocast_on  # noqa: E402
from nested_cases import CASES  # noqa: E402

DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


def on_fake_cuda(name: str, dtype: torch.dtype) -> dict[str, str]:
    """One case under torch's CUDA autocast on fake CUDA tensors."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x, w = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
        with cuda_autocast_on(dtype):
            return CASES[name](x, w)


def on_ampref(name: str, dtype: torch.dtype) -> dict[str, str]:
    """One case on CPU tensors under ``ampref.torch.autocast("cuda")``."""
    import ampref.torch as at

    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with at.autocast("cuda", dtype):
        return CASES[name](x, w)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--oracle-only", action="store_true")
    args = ap.parse_args(argv)
    rows = {name: {d: on_fake_cuda(name, dt) for d, dt in DTYPES.items()} for name in CASES}
    differ = 0
    if not args.oracle_only:
        for name in CASES:
            for d, dt in DTYPES.items():
                ours = on_ampref(name, dt)
                if ours != rows[name][d]:
                    differ += 1
                    print(f"{name} {d}: CUDA {rows[name][d]} ampref {ours}")
        print(f"{len(CASES) * len(DTYPES) - differ} of {len(CASES) * len(DTYPES)} equal")
    if args.out:
        head = {"provenance": f"scripts/fake_cuda_nested.py: torch {torch.__version__}'s "
                              f"CUDA autocast on fake CUDA tensors, no GPU (cuda available: "
                              f"{torch.cuda.is_available()})", "torch": torch.__version__}
        atomic_write(args.out, json.dumps({**head, "cases": rows}, indent=1) + "\n")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
