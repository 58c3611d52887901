"""Exhaustive certificate on a device backend (``ampref verify --backend cupy``,
``specs/formats.md`` FMT-VER-004).

The same claim as :func:`ampref.certify.verify.verify` (every float32 bit pattern, or
every ``stride``-th, rounded by ampref equals the float64 oracle), with both sides on the
device: the patterns are made there (``arange`` over uint32), the backend's CUDA kernel
rounds them, and the oracle is :func:`~ampref.certify.verify.reference_quantize` itself
run on the device's array module, a formula in float64 arithmetic that shares no code
with the integer kernel. Only counts and the first differing patterns come back to the
host. NumPy's and ml_dtypes' casts (the host verifier's second reference) have no device
twin and are not run here.

Stochastic rounding draws each pattern's word from (seed, pattern): the kernel's
counter is the pattern itself, which holds for a stride of 1 only, so stochastic cells
need ``stride=1`` on the device.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.rounding import RoundingMode, get_rounding
from ampref.formats.table import get_format
from ampref.kernels.srhash import check_seed
from .verify import VerifyResult, reference_quantize

__all__ = ["DEVICE_BLOCK", "verify_device"]

#: patterns per device pass: the oracle in one piece peaks at about 120 bytes per pattern
#: (tracemalloc on the host, 2^20 patterns), so a pass holds about 2 GB; 256 passes
#: cover all 2^32 patterns
DEVICE_BLOCK = 1 << 24


def _check_span(span: tuple[int, int], stride: int) -> tuple[int, int]:
    """A pattern range [lo, hi) inside [0, 2^32), and a positive int stride."""
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be a positive int, got {stride!r}")
    ok = (isinstance(span, tuple) and len(span) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) for v in span))
    if not ok or not 0 <= span[0] < span[1] <= 1 << 32:
        raise ValueError(f"span must be (lo, hi) ints with 0 <= lo < hi <= 2**32 (float32 bit "
                         f"patterns), got {span!r}")
    return span


def verify_device(fmt: Any, rounding: str = "nearest_even", *, backend: Any = "cupy",
                  stride: int = 1, saturate: bool = False, subnormals: bool = True,
                  seed: int = 0, span: tuple[int, int] = (0, 1 << 32),
                  block: int = DEVICE_BLOCK) -> VerifyResult:
    """Verify the float32 patterns lo, lo + stride, ... < hi of ``span`` on ``backend``.

    NaN outputs agree with any NaN (as on the host); every other word must be equal bit
    for bit, ±0 included.

    Raises:
        ValueError: unknown format, mode or backend (choices named), a bad stride or span,
            stochastic rounding with a stride other than 1, or a backend without device
            kernels.
    """
    from ampref import backends

    fmt_obj, rnd = get_format(fmt), get_rounding(rounding)
    saturate, subnormals = check_flag("saturate", saturate), check_flag("subnormals", subnormals)
    lo, hi = _check_span(span, stride)
    if rnd is RoundingMode.STOCHASTIC and stride != 1:
        raise ValueError(f"stochastic rounding on a device needs stride=1 (the kernel's "
                         f"counter is the element's place), got stride={stride}")
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive int, got {block!r}")
    seed = check_seed(seed)  # named before the backend is imported
    be = backends.resolve(backend)
    if be.xp is np or not hasattr(be.xp, "asnumpy"):
        raise ValueError(f"verify_device needs a device backend (cupy), got {be.name!r}; "
                         "the host's verifier is ampref.certify.verify.verify")
    res = VerifyResult(fmt=fmt_obj.name, rounding=rnd.value)
    t0 = time.perf_counter()
    span_len = block * stride
    for start in range(lo, hi, span_len):
        res.merge(_block(be, start, min(start + span_len, hi), stride, fmt_obj, rnd,
                         saturate, subnormals, seed))
    res.seconds = time.perf_counter() - t0
    return res


def _block(be: Any, start: int, stop: int, stride: int, fmt: Any, rnd: RoundingMode,
           saturate: bool, subnormals: bool, seed: int) -> VerifyResult:
    """One device pass: patterns start, start + stride, ... < stop."""
    xp = be.xp
    res = VerifyResult(fmt=fmt.name, rounding=rnd.value)
    count = (stop - start + stride - 1) // stride
    # phase 1: the patterns, made on the device (uint64 arange: stop may be 2^32)
    pats = (xp.arange(count, dtype=xp.uint64) * stride + start).astype(xp.uint32)
    x = pats.view(xp.float32)
    # phase 2: the kernel under test, and the oracle's words for stochastic rounding
    stochastic = rnd is RoundingMode.STOCHASTIC
    ours = be.quantize(x, fmt, rnd.value, saturate=saturate, subnormals=subnormals,
                       seed=seed if stochastic else None, start=start if stochastic else 0)
    words = be.random_bits(seed, start, count) if stochastic else None
    # phase 3: the float64 oracle on the device's array module
    ref = reference_quantize(x, fmt, rnd, saturate=saturate, subnormals=subnormals,
                             rbits=words, xp=xp)
    # phase 4: compare words on the device; two NaNs agree
    ob, rb = ours.view(xp.uint32), ref.view(xp.uint32)
    bad = (ob != rb) & ~(xp.isnan(ours) & xp.isnan(ref))
    res.checked = count
    res.mismatches = int(xp.count_nonzero(bad))
    if res.mismatches:  # the first five, explicitly to the host, for the report
        at = xp.nonzero(bad)[0][:5]
        where, got, want = (xp.asnumpy(v) for v in (at, ob[at], rb[at]))
        for i, o, r in zip(where, got, want, strict=True):
            res.first.append(("device oracle", f"{start + int(i) * stride:#010x}",
                              f"{int(o):#010x}", f"{int(r):#010x}"))
    return res
