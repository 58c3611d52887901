"""Cast throughput: ampref against NumPy's float16 cast, ml_dtypes and pychop, one run.

Usage: python benchmarks/bench_cast.py [--n 4000000] [--repeat 5]

Both sides produce the 8/16-bit encoding from float32 input (ampref.encode vs
``astype``), the like-for-like comparison; ``quantize`` (back to float32 values) is
listed too. Times are the minimum over repeats. Data sets:

* typical: normal(0, 1) * 100
* wide: log-uniform magnitudes over the target format's whole range, from a quarter
  of its smallest subnormal to 4x its max (subnormals, underflow and overflow), random
  signs.
"""

from __future__ import annotations

import argparse
import platform
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
from _timing import best_time

import ampref

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None

try:
    import pychop  # type: ignore[import-not-found]
except ImportError:
    pychop = None

CASES = [("float16", "float16"), ("bfloat16", "bfloat16"), ("float8_e4m3fn", "float8_e4m3fn")]
#: issue 26's targets (ratio to the peer, typical data): fp16 >= 2x NumPy's cast,
#: bf16 >= 1x ml_dtypes, e4m3fn >= 3x ml_dtypes
TARGETS = {("float16", "typical"): 2.0, ("bfloat16", "typical"): 1.0,
           ("float8_e4m3fn", "typical"): 3.0}




def datasets(fmt: ampref.Format, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    lo, hi = np.log(fmt.smallest_subnormal / 4), np.log(min(fmt.max * 4, 3e38))
    wide = np.exp(rng.uniform(lo, hi, n)) * rng.choice([-1.0, 1.0], n)
    return {"typical": (rng.standard_normal(n) * 100).astype(np.float32),
            "wide": wide.astype(np.float32)}


def peer_cast(name: str) -> tuple[str, Callable[[np.ndarray], Any]] | None:
    if name == "float16":
        return "numpy", lambda x: x.astype(np.float16)
    if ml_dtypes is not None:
        dt = getattr(ml_dtypes, name)
        return "ml_dtypes", lambda x: x.astype(dt)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rng = np.random.default_rng(0)
    print(f"machine: {platform.processor() or platform.machine()}, python "
          f"{platform.python_version()}, numpy {np.__version__}, "
          f"ml_dtypes {getattr(ml_dtypes, '__version__', 'absent')}, "
          f"pychop {getattr(pychop, '__version__', 'absent')}; n = {args.n}")
    print(f"{'format':15} {'data':8} {'ampref encode':>14} {'quantize':>9} {'peer':>18} "
          f"{'ratio':>6} {'target':>7}")
    for name, _ in CASES:
        fmt = ampref.get_format(name)
        peer = peer_cast(name)
        for label, x in datasets(fmt, args.n, rng).items():
            t_enc = best_time(lambda: ampref.encode(x, fmt), args.repeat)
            t_q = best_time(lambda: ampref.quantize(x, fmt), args.repeat)
            row = (f"{name:15} {label:8} {args.n / t_enc / 1e6:10.1f} M/s "
                   f"{args.n / t_q / 1e6:7.1f}")
            if peer is not None:
                t_p = best_time(lambda: peer[1](x), args.repeat)
                ratio = t_p / t_enc
                target = TARGETS.get((name, label))
                row += (f" {peer[0]:>9} {args.n / t_p / 1e6:6.1f} M/s {ratio:6.2f}"
                        f" {'>= ' + str(target) if target else '':>7}")
            print(row)
    if pychop is not None:
        x = datasets(ampref.float16, args.n // 10, rng)["typical"].astype(np.float64)
        ch = pychop.Chop("h")
        t = best_time(lambda: ch(x), 2)
        print(f"pychop Chop('h') float64 typical: {args.n / 10 / t / 1e6:.1f} M/s")


if __name__ == "__main__":
    main()
