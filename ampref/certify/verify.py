"""Exhaustive certificate: every float32 bit pattern against independent implementations.

Two independent references (FMT-VER-001):

* the *float64 oracle* :func:`reference_quantize` below, which rounds with exact float64
  arithmetic (``frexp``, ``ldexp``, ``floor`` on values that are exact in float64) and
  shares no code with the integer kernels of :mod:`ampref.formats.cast`; it covers every mode;
* for ``nearest_even``, NumPy's float16 cast and ml_dtypes' casts (C implementations),
  compared code for code, with their documented deviations excluded and counted.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref import kernels
from ampref.kernels.threads import ENV_THREADS
from ampref.common.checks import check_flag
from ampref.formats.cast import decode, encode, quantize, quantize_with_words
from ampref.formats.table import Encoding, Format, get_format
from ampref.formats.rounding import RoundingMode, get_rounding
from ampref.kernels.srhash import check_seed, random_bits_at

__all__ = ["reference_quantize", "VerifyResult", "verify", "verify_block"]

_BLOCK = 1 << 22


#: at most this many worker processes (more only add start-up cost and memory)
MAX_WORKERS = 4 * (os.cpu_count() or 1)


#: elements per pass of the oracle: its ~40 float64 temporaries then stay in the cache
#: (measured on a 2^22 block: 0.70 s in one piece, 0.09 s in pieces of 2^16)
_ORACLE_CHUNK = 1 << 16


def reference_quantize(x: npt.NDArray[np.float32], fmt: Format, rnd: RoundingMode, *,
                       saturate: bool = False, subnormals: bool = True,
                       rbits: Any = None, xp: Any = np) -> npt.NDArray[np.float32]:
    """Round float32 ``x`` to ``fmt`` with float64 arithmetic (the independent oracle).

    Every step is exact in float64: float32 values and the format's grid points have at
    most 24 significant bits, quanta are powers of two, and ``a / q`` spans < 2^53.
    Elementwise, so on the host it runs over pieces of ``_ORACLE_CHUNK`` elements; with
    ``xp`` a device array module (CuPy) it runs on device arrays in one piece, the same
    formula (the device verifier's oracle, FMT-VER-004). NaN inputs give NaN (a code of
    the format's own for NaN-less formats is decided by the caller's comparison), ±0 keep
    their sign where the format has -0, inf and overflow follow the mode and
    ``saturate``, subnormal results flush only with ``subnormals=False``.
    """
    # why long: the oracle is one straight formula, step after step, kept whole so it reads
    # against the spec; it shares no helper with the kernels it checks
    x = xp.asarray(x, dtype=xp.float32)
    if xp is np and x.size > _ORACLE_CHUNK:
        flat = x.reshape(-1)
        words = None if rbits is None else np.broadcast_to(np.asarray(rbits), x.shape).reshape(-1)
        out = np.empty(flat.shape, np.float32)
        for i in range(0, flat.size, _ORACLE_CHUNK):
            sl = slice(i, i + _ORACLE_CHUNK)
            out[sl] = reference_quantize(flat[sl], fmt, rnd, saturate=saturate,
                                         subnormals=subnormals,
                                         rbits=None if words is None else words[sl])
        return out.reshape(x.shape)
    neg = xp.signbit(x)
    with np.errstate(invalid="ignore"):  # signalling NaNs quieten on widening
        a = xp.abs(x.astype(xp.float64))
    finite_pos = xp.isfinite(a) & (a > 0)
    safe = xp.where(finite_pos, a, 1.0)
    _, e = xp.frexp(safe)  # safe = m * 2^e, m in [0.5, 1): floor(log2) = e - 1
    tiny = math.ldexp(1.0, fmt.minexp)
    qexp = xp.maximum(e - 1, fmt.minexp) - fmt.mantissa_bits
    if not fmt.has_subnormals:
        qexp = xp.where(safe < tiny, fmt.minexp, qexp)
    q = xp.ldexp(1.0, qexp)
    t = safe / q
    n = xp.floor(t)
    lo, hi = n * q, (n + 1) * q
    frac = t - n
    inexact = frac > 0
    if rnd in (RoundingMode.NEAREST_EVEN, RoundingMode.ODD):
        # n is an integer below 2^53, so n / 2 is exact and odd n leave a fraction
        half = n * 0.5
        lo_odd = (half != xp.floor(half)) | ((fmt.mantissa_bits == 0) & (n > 0))
    if rnd is RoundingMode.NEAREST_EVEN:
        up = (frac > 0.5) | ((frac == 0.5) & lo_odd)
    elif rnd is RoundingMode.NEAREST_AWAY:
        up = frac >= 0.5
    elif rnd is RoundingMode.TOWARD_ZERO:
        up = xp.zeros_like(inexact)
    elif rnd is RoundingMode.TOWARD_POSITIVE:
        up = inexact & ~neg
    elif rnd is RoundingMode.TOWARD_NEGATIVE:
        up = inexact & neg
    elif rnd is RoundingMode.ODD:
        up = inexact & ~lo_odd
    else:
        up = xp.floor(frac * 2.0**32) > xp.asarray(rbits, dtype=xp.float64)
    v = xp.where(up, hi, lo)
    fmax = fmt.max
    # the modes that round an overflow toward the largest finite value
    if rnd in (RoundingMode.TOWARD_ZERO, RoundingMode.ODD):
        down = xp.ones_like(neg)
    elif rnd is RoundingMode.TOWARD_POSITIVE:
        down = neg
    elif rnd is RoundingMode.TOWARD_NEGATIVE:
        down = ~neg
    else:
        down = xp.zeros_like(neg)
    if fmt.has_inf:
        over_val = xp.inf
    elif fmt.has_nan:
        over_val = xp.nan
    else:
        over_val = fmax
    clamp = down | saturate if fmt.has_nan else xp.ones_like(neg)
    v = xp.where(v > fmax, xp.where(clamp, fmax, over_val), v)
    if not fmt.has_zero:
        v = xp.where(v == 0, tiny, v)
    if not subnormals:
        v = xp.where((v > 0) & (v < tiny), 0.0, v)
    # specials of the input
    inf_val = fmax if (saturate or not fmt.has_nan) else (xp.inf if fmt.has_inf else xp.nan)
    v = xp.where(xp.isinf(a), inf_val, v)
    v = xp.where(a == 0, 0.0, v)
    v = xp.where(xp.isnan(a), xp.nan, v)
    if not fmt.is_signed:
        v = xp.where(neg | (a == 0), xp.nan, v)
    out = xp.where(neg, -v, v)
    if not fmt.has_negative_zero:
        out = xp.where(out == 0, 0.0, out)
    return out.astype(xp.float32)


@dataclass(kw_only=True)
class VerifyResult:
    """Counts of one verification run (see FMT-VER-001)."""

    fmt: str
    rounding: str
    checked: int = 0
    mismatches: int = 0
    peer_checked: int = 0
    peer_mismatches: int = 0
    peer_excluded: int = 0
    peer: str = "none"
    first: list[tuple[str, str, str, str]] = field(default_factory=list)
    seconds: float = 0.0

    def merge(self, other: VerifyResult) -> None:
        self.checked += other.checked
        self.mismatches += other.mismatches
        self.peer_checked += other.peer_checked
        self.peer_mismatches += other.peer_mismatches
        self.peer_excluded += other.peer_excluded
        self.peer = other.peer if other.peer != "none" else self.peer
        self.first = (self.first + other.first)[:10]

    @property
    def ok(self) -> bool:
        return self.mismatches == 0 and self.peer_mismatches == 0


def _peer(fmt: Format) -> tuple[str, Any] | None:
    if fmt.name == "float16":
        return "numpy", np.float16
    if fmt.dtype_name and fmt.name != "float32":
        try:
            import ml_dtypes
        except ImportError:
            return None
        return "ml_dtypes", getattr(ml_dtypes, fmt.dtype_name)
    return None


def _peer_excluded(x: npt.NDArray[np.float32], fmt: Format) -> npt.NDArray[np.bool_]:
    """Inputs where the peer library documentedly differs (FMT-SPC-001/004/005)."""
    no_nan_code = fmt.encoding in (Encoding.FINITE, Encoding.IEEE)
    excl = np.isnan(x) if no_nan_code else np.zeros(x.shape, bool)
    if fmt.encoding is Encoding.FNU:
        a = np.abs(x)
        excl |= (a >= 2.0**-127) & (a < 2.0**-126)
        excl |= (a < 2.0**-127) & (a > 0)  # ml_dtypes: 0 code as well, but via subnormal path
    return excl


def verify_block(start: int, stop: int, stride: int, fmt_name: str, rounding: str,
                 saturate: bool, subnormals: bool, seed: int) -> VerifyResult:
    """Check the float32 patterns start, start+stride, ... < stop."""
    fmt, rnd = get_format(fmt_name), get_rounding(rounding)
    res = VerifyResult(fmt=fmt.name, rounding=rnd.value)
    pats = np.arange(start, stop, stride, dtype=np.uint32)  # stop <= 2^32: fits
    x = pats.view(np.float32)
    rbits = None
    if rnd is RoundingMode.STOCHASTIC:
        # the element index is the bit pattern itself, so strided and full runs agree
        rbits = random_bits_at(seed, pats)
        ours = quantize_with_words(x, fmt, rbits, saturate=saturate, subnormals=subnormals)
    else:
        codes = encode(x[~np.isnan(x)], fmt, rnd, saturate=saturate, subnormals=subnormals) \
            if not fmt.has_nan else encode(x, fmt, rnd, saturate=saturate, subnormals=subnormals)
        ours = quantize(x, fmt, rnd, saturate=saturate, subnormals=subnormals) \
            if not fmt.has_nan else decode(codes, fmt)
    ref = _oracle(x, fmt, rnd, saturate, subnormals, rbits)
    ob, rb = ours.view(np.uint32), ref.view(np.uint32)
    res.checked = x.size
    res.mismatches, first = _differ(ob, rb, float_words=True)
    for i in first:
        res.first.append(("oracle", f"{int(pats[i]):#010x}", f"{int(ob[i]):#010x}",
                          f"{int(rb[i]):#010x}"))
    peer = _peer(fmt)
    if rnd is RoundingMode.NEAREST_EVEN and not saturate and subnormals and peer is not None:
        res.peer = peer[0]
        excl = _peer_excluded(x, fmt)
        xs = x[~excl]
        with np.errstate(all="ignore"):
            theirs = xs.astype(peer[1]).view(fmt.code_dtype)
        mine = codes[~excl] if fmt.has_nan else encode(xs, fmt)
        res.peer_checked, res.peer_excluded = xs.size, int(excl.sum())
        res.peer_mismatches, first = _differ(mine, theirs, float_words=False)
        pp = pats[~excl]
        for i in first:
            res.first.append((peer[0], f"{int(pp[i]):#010x}", f"{int(mine[i]):#x}",
                              f"{int(theirs[i]):#x}"))
    return res


def _oracle(x: npt.NDArray[np.float32], fmt: Format, rnd: RoundingMode, saturate: bool,
            subnormals: bool, rbits: Any) -> npt.NDArray[np.float32]:
    """The float64 oracle by the active kernels: :func:`reference_quantize`, or its
    compiled twin (:mod:`ampref.kernels.oracle_numba`), the same formula per element."""
    if not kernels.compiled():
        return reference_quantize(x, fmt, rnd, saturate=saturate, subnormals=subnormals,
                                  rbits=rbits)
    from ampref.kernels import oracle_numba

    of = oracle_numba.OracleFormat(
        minexp=fmt.minexp, mantissa_bits=fmt.mantissa_bits, max=fmt.max,
        has_subnormals=fmt.has_subnormals, has_inf=fmt.has_inf, has_nan=fmt.has_nan,
        has_zero=fmt.has_zero, is_signed=fmt.is_signed, has_negative_zero=fmt.has_negative_zero)
    return oracle_numba.reference_quantize(x, of, rnd.code, saturate=saturate,
                                           subnormals=subnormals, rbits=rbits)


def _differ(ours: Any, ref: Any, *, float_words: bool) -> tuple[int, Any]:
    """Count of differing words (float32 words: two NaNs agree) and the first five."""
    if kernels.compiled():
        from ampref.kernels import oracle_numba

        return oracle_numba.count_mismatches(ours, ref, float_words=float_words)
    bad = ours != ref
    if float_words:
        bad &= ~(np.isnan(ours.view(np.float32)) & np.isnan(ref.view(np.float32)))
    return int(bad.sum()), np.flatnonzero(bad)[:5]


def verify(fmt: str | Format, rounding: str = "nearest_even", *, stride: int = 1,
           saturate: bool = False, subnormals: bool = True, seed: int = 0,
           workers: int = 2, progress: bool = True) -> VerifyResult:
    """Verify all float32 patterns (every ``stride``-th) for one format and mode."""
    fmt_obj, rnd = get_format(fmt), get_rounding(rounding)
    saturate, subnormals = check_flag("saturate", saturate), check_flag("subnormals", subnormals)
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    seed = check_seed(seed)  # here, not in a worker after the progress bar has started
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise ValueError(f"workers must be an int in [1, {MAX_WORKERS}] (processes on this "
                         f"machine's {os.cpu_count() or 1} cores), got {workers!r}")
    span = _BLOCK * stride
    jobs = [(s, min(s + span, 1 << 32), stride, fmt_obj.name, rnd.value, saturate, subnormals, seed)
            for s in range(0, 1 << 32, span)]
    total = VerifyResult(fmt=fmt_obj.name, rounding=rnd.value)
    t0 = time.perf_counter()
    bar = _progress(len(jobs), f"{fmt_obj.name} {rnd.value}", progress)
    if workers == 1:
        for job in jobs:
            total.merge(verify_block(*job))
            bar.update(1)
    else:
        # each worker runs its kernels on its share of the cores (inherited at spawn)
        share = str(max(1, (os.cpu_count() or 1) // workers))
        saved = os.environ.get(ENV_THREADS)
        os.environ[ENV_THREADS] = share
        try:
            with mp.get_context("spawn").Pool(workers) as pool:
                for r in pool.imap_unordered(_run_job, jobs):
                    total.merge(r)
                    bar.update(1)
        finally:
            if saved is None:
                os.environ.pop(ENV_THREADS, None)
            else:
                os.environ[ENV_THREADS] = saved
    bar.close()
    total.seconds = time.perf_counter() - t0
    return total


def _run_job(job: tuple[Any, ...]) -> VerifyResult:
    return verify_block(*job)


def _progress(total: int, desc: str, enabled: bool) -> Any:
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        enabled = False
    if not enabled:
        class _Null:
            def update(self, n: int) -> None: ...
            def close(self) -> None: ...
        return _Null()
    return tqdm(total=total, desc=desc, unit="block")


def summary(res: VerifyResult) -> str:
    """Human-readable summary, hex for the first mismatches."""
    lines = [
        f"ampref verify: format={res.fmt} rounding={res.rounding}",
        f"  float32 patterns checked against the float64 oracle: {res.checked:,}; "
        f"mismatches: {res.mismatches}",
    ]
    if res.peer != "none":
        lines.append(f"  codes checked against {res.peer}: {res.peer_checked:,} "
                     f"(excluded documented deviations: {res.peer_excluded:,}); "
                     f"mismatches: {res.peer_mismatches}")
    for who, pat, mine, theirs in res.first:
        lines.append(f"  first mismatch vs {who}: input {pat} ampref {mine} reference {theirs}")
    lines.append(f"  time: {res.seconds:.1f} s; result: {'PASS' if res.ok else 'FAIL'}")
    return "\n".join(lines)
