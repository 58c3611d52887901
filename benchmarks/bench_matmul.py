"""Tensor-core GEMM model speed as a ratio to NumPy's float32 BLAS matmul, one run.

Usage: python benchmarks/bench_matmul.py [--n 512] [--threads 2]
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
from _timing import best_time

import ampref




def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = args.n
    rng = np.random.default_rng(0)
    print(f"machine: {platform.machine()}, numpy {np.__version__}; GEMM {n}^3, "
          f"threads {args.threads}")
    a32 = rng.standard_normal((n, n)).astype(np.float32)
    b32 = rng.standard_normal((n, n)).astype(np.float32)
    t_blas = best_time(lambda: a32 @ b32, 20)
    print(f"numpy float32 BLAS matmul: {t_blas * 1e3:.2f} ms")
    for model, fmt in (("tensorcore:h100", "fp16"), ("tensorcore:h100", "bf16"),
                       ("tensorcore:b200", "e4m3"), ("tensorcore:a100", "tf32"),
                       ("tensorcore:b200", "e2m1"), ("tensorcore:mi300", "fp16"),
                       ("tensorcore:mi300", "e4m3fnuz"), ("tensorcore:mi250", "bf16")):
        rnd = "toward_zero" if fmt == "tf32" else "nearest_even"
        A = ampref.quantize(a32, fmt, rnd, saturate=True).astype(np.float64)
        B = ampref.quantize(b32, fmt, rnd, saturate=True).astype(np.float64)
        t = best_time(lambda: ampref.matmul(A, B, input_format=fmt, accumulation=model,
                                       threads=args.threads), args.repeat)
        print(f"{model:18} {fmt:5} {t:7.3f} s  {n**3 / t / 1e6:6.1f} M MAC/s  "
              f"{t / t_blas:6.0f}x BLAS")
    # block-scaled MMA (ampref.blockmma) through the recipes' GEMM: A @ B^T, K along rows
    for recipe in ("nvfp4", "mxfp8_e4m3"):
        qa = ampref.recipes.quantize(a32, recipe)
        qb = ampref.recipes.quantize(np.ascontiguousarray(b32.T), recipe)
        t = best_time(lambda: ampref.recipes.matmul(qa, qb, accumulation="tensorcore:b200"),
                      args.repeat)
        print(f"{'b200 block-scaled':18} {recipe:5} {t:7.3f} s  {n**3 / t / 1e6:6.1f} M MAC/s  "
              f"{t / t_blas:6.0f}x BLAS")


if __name__ == "__main__":
    main()
