"""The CuPy backend's kernels against named peers, one run.

Usage: python benchmarks/bench_device.py [--n 4000000] [--repeat 5]

Host part (any machine with a C++ compiler): the device quantize kernel's source built
for the host (one scalar loop, general path for every element) next to the NumPy
reference ``ampref.quantize`` and ml_dtypes' cast. It shows what the shared source costs
per element, not GPU speed.

Device part (CuPy and a CUDA device; skipped otherwise): the quantize kernel next to
CuPy's float16 ``astype``; fp16 matmul via cublasGemmEx and via the tensor-core chain
kernel next to ``cupy.matmul`` on float16, and the exact (certified) float32 matmul next
to ``cupy.matmul`` on float32; then the fused exact kernel against the specification's
phases from small to large GEMMs and sums (where ``FUSED_EXACT_LIMITS`` should lie). GPU
times include a device synchronisation.
"""

from __future__ import annotations

import argparse
import platform
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
from _timing import best_time

import ampref
from ampref.backends import hostbuild, kernelsrc

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def host_part(n: int, repeat: int) -> None:
    k = hostbuild.HostKernels()
    x = (np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32)
    print(f"host build of the device kernel, {n:,} float32 elements, "
          f"{platform.processor() or platform.machine()}")
    print(f"{'format':<16}{'kernel Melem/s':>16}{'ampref Melem/s':>16}"
          f"{'NumPy/ml_dtypes Melem/s':>25}{'kernel/ampref':>15}{'kernel/peer':>13}")
    for name in ("float16", "bfloat16", "float8_e4m3fn"):
        p = kernelsrc.format_params(name)
        tk = best_time(lambda: k.quantize(x, p, 0, False, True, 0, 0), repeat)
        ta = best_time(lambda: ampref.quantize(x, name), repeat)
        dt = np.float16 if name == "float16" else getattr(ml_dtypes, name, None)
        tm = best_time(lambda: x.astype(dt), repeat) if dt is not None else float("nan")
        print(f"{name:<16}{n / tk / 1e6:>16.1f}{n / ta / 1e6:>16.1f}{n / tm / 1e6:>25.1f}"
              f"{ta / tk:>15.2f}{tm / tk:>13.2f}")


def device_part(n: int, repeat: int) -> None:
    try:
        import cupy as cp

        from ampref import backends
        if not backends.available("cupy"):
            raise RuntimeError("no CUDA device")
    except Exception as e:  # noqa: BLE001 - any reason for no device ends this part
        print(f"\ndevice part skipped: {type(e).__name__}: {e}")
        return
    be = backends.get("cupy")

    def timed(f: object) -> float:
        def run() -> None:
            f()  # type: ignore[operator]
            cp.cuda.Device().synchronize()
        run()
        return best_time(run, repeat)

    name = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    x = cp.asarray((np.random.default_rng(0).standard_normal(n) * 100).astype(np.float32))
    tq = timed(lambda: be.quantize(x, "float16"))
    tc = timed(lambda: x.astype(cp.float16))
    print(f"\n{name}: quantize float16 {n / tq / 1e9:.2f} Gelem/s, cupy astype(float16) "
          f"{n / tc / 1e9:.2f} Gelem/s, ratio {tc / tq:.2f}")
    for M in (1024, 4096):
        a32, b32 = (np.random.default_rng(s).standard_normal((M, M)).astype(np.float32)
                    for s in (1, 2))
        a, b = be.quantize(cp.asarray(a32), "fp16"), be.quantize(cp.asarray(b32), "fp16")
        a16, b16 = a.astype(cp.float16), b.astype(cp.float16)
        flop = 2 * M**3
        t_ref = timed(lambda: cp.matmul(a16, b16))
        t_gemm = timed(lambda: be.matmul(a, b, "cublas", "float16"))
        t_mma = timed(lambda: be.matmul(a, b, "tensorcore:h100", "float16"))
        t_f32 = timed(lambda: cp.matmul(a, b))
        t_exact = timed(lambda: be.matmul(a, b, "exact", "float16"))
        print(f"{M}^3: cupy fp16 {flop / t_ref / 1e12:.1f} TFLOP/s "
              f"| gemmEx {flop / t_gemm / 1e12:.1f} ({t_ref / t_gemm:.2f}x) "
              f"| chain kernel {flop / t_mma / 1e12:.2f} ({t_ref / t_mma:.3f}x) "
              f"| cupy fp32 {flop / t_f32 / 1e12:.1f} "
              f"| exact {flop / t_exact / 1e12:.2f} ({t_f32 / t_exact:.3f}x fp32)")
    exact_memory(be)
    exact_crossover(be, timed)


def exact_memory(be: Any) -> None:
    """ENG-MM-003 on the device: the exact GEMM's memory at 4096^3 and 8192^3 (the CuPy
    pool's bytes after one call from an empty pool: it keeps what it allocated, so this
    is the peak held), as a multiple of operands + output, and its time."""
    import time

    import cupy as cp

    pool = cp.get_default_memory_pool()
    for M in (4096, 8192):
        a, b = (be.quantize(cp.asarray(np.random.default_rng(s).standard_normal((M, M))
                                       .astype(np.float32)), "fp16") for s in (1, 2))
        base = 3 * M * M * 4  # a, b and the float32 output
        pool.free_all_blocks()
        held = pool.total_bytes()
        t0 = time.perf_counter()
        be.matmul(a, b, "exact", "float16")
        cp.cuda.Device().synchronize()
        dt = time.perf_counter() - t0
        grew = pool.total_bytes() - held
        print(f"exact {M}^3: {dt:.2f} s, {2 * M**3 / dt / 1e12:.2f} TFLOP/s, the pool grew "
              f"{grew / 2**30:.2f} GiB during the call = {grew / base:.1f}x operands + output")
        del a, b
        if dt > 5.0:  # 8192^3 is 8x the work: leave the rest of the bench its time
            print(f"exact {2 * M}^3 skipped (the {M}^3 call took {dt:.1f} s)")
            break


def exact_crossover(be: Any, timed: Any) -> None:
    """The fused exact kernel (BKD-MM-005) against the specification's phases on the
    device, GEMMs of 2^12..2^30 products and row sums, so that FUSED_EXACT_LIMITS can be
    set from a measurement (the same bits either way)."""
    import cupy as cp

    from ampref.backends.fused import FUSED_EXACT_LIMITS

    print(f"\nexact: fused kernel vs the specification's phases (limits now "
          f"{FUSED_EXACT_LIMITS})")
    for M, K, N in ((16, 16, 16), (64, 64, 64), (512, 64, 256), (512, 256, 64),
                    (1024, 256, 1024), (1024, 1024, 1024)):
        a = be.quantize(cp.asarray(np.random.default_rng(1).standard_normal((M, K))
                                   .astype(np.float32)), "fp16")
        b = be.quantize(cp.asarray(np.random.default_rng(2).standard_normal((K, N))
                                   .astype(np.float32)), "fp16")
        with ampref.use_kernels("compiled"), _limits(FUSED_EXACT_LIMITS, gemm=1 << 62):
            t_fused = timed(lambda: be.matmul(a, b))
        with ampref.use_kernels("numpy"):
            t_spec = timed(lambda: be.matmul(a, b))
        print(f"  gemm {M}x{K}x{N} ({M * K * N:.1e} products): fused {t_fused * 1e3:.3f} ms, "
              f"phases {t_spec * 1e3:.3f} ms, fused/phases time {t_fused / t_spec:.2f}")
    for R, L in ((64, 512), (256, 4096), (16, 65536)):
        x = be.quantize(cp.asarray(np.random.default_rng(3).standard_normal((R, L))
                                   .astype(np.float32)), "fp16")
        with ampref.use_kernels("compiled"), _limits(FUSED_EXACT_LIMITS, sum=1 << 62):
            t_fused = timed(lambda: be.sum(x, 1))
        with ampref.use_kernels("numpy"):
            t_spec = timed(lambda: be.sum(x, 1))
        print(f"  sum {R} rows x {L}: fused {t_fused * 1e3:.3f} ms, phases "
              f"{t_spec * 1e3:.3f} ms, fused/phases time {t_fused / t_spec:.2f}")


@contextmanager
def _limits(limits: dict[str, int], **override: int) -> Iterator[None]:
    saved = dict(limits)
    limits.update(override)
    try:
        yield
    finally:
        limits.update(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    host_part(args.n, args.repeat)
    device_part(args.n, args.repeat)


if __name__ == "__main__":
    main()
