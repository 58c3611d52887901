"""hypothesis strategies for numeric code: values of a format, the inputs that break casts,
and matrices whose blocks break block-scaled quantizers (need the ``test`` extra)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from ampref.formats.cast import decode
from ampref.formats.table import Format, get_format

__all__ = ["arrays", "check_shape", "hard_cases", "hypothesis_st", "representable"]


def hypothesis_st() -> Any:
    try:
        from hypothesis import strategies as st
    except ImportError as e:  # pragma: no cover
        raise ImportError("ampref.testing strategies need hypothesis: pip install "
                          "'ampref[test]'") from e
    return st


def check_shape(name: str, shape: Any) -> tuple[int, ...]:
    """An array shape for a strategy: an int or a tuple of ints, each >= 0, checked when
    the strategy is built (hypothesis would only fail when it first draws).

    Raises:
        TypeError: not an int or a tuple of ints (bools refused).
        ValueError: a negative entry.
    """
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    if not isinstance(dims, tuple) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_))
            for d in dims):
        raise TypeError(f"{name} must be an int or a tuple of ints, got {shape!r}")
    if any(d < 0 for d in dims):
        raise ValueError(f"{name} entries must be >= 0, got {shape!r}")
    return tuple(int(d) for d in dims)


def representable(fmt: str | Format, *, allow_nan: bool = False, allow_infinity: bool = False,
                  allow_subnormal: bool = True) -> Any:
    """Strategy of Python floats exactly representable in ``fmt``.

    Raises:
        TypeError: a flag that is not a bool.
        ValueError: an unknown format.
    """
    st = hypothesis_st()
    fmt = get_format(fmt)
    allow_nan, allow_infinity = check_flag("allow_nan", allow_nan), check_flag(
        "allow_infinity", allow_infinity)
    allow_subnormal = check_flag("allow_subnormal", allow_subnormal)

    def ok(code: int) -> bool:
        v = float(decode(np.array([code], dtype=np.uint32), fmt)[0])
        if np.isnan(v):
            return allow_nan
        if np.isinf(v):
            return allow_infinity
        if not allow_subnormal and v != 0 and abs(v) < fmt.tiny:
            return False
        return True

    return (st.integers(0, (1 << fmt.bits) - 1).filter(ok)
            .map(lambda c: float(decode(np.array([c], dtype=np.uint32), fmt)[0])))


def arrays(fmt: str | Format, shape: int | tuple[int, ...], *, dtype: Any = np.float32,
           allow_nan: bool = False, allow_infinity: bool = False) -> Any:
    """Strategy of arrays (float32 by default) of values representable in ``fmt``.

    Raises:
        TypeError: a bad shape (see :func:`check_shape`) or flag.
        ValueError: an unknown format, a negative dim, a ``dtype`` other than float32 or
            float64, or float32 for a format it cannot hold (float64).
    """
    hypothesis_st()  # a clear ImportError without hypothesis
    from hypothesis.extra import numpy as hnp

    shape = check_shape("shape", shape)
    fmt = get_format(fmt)
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64) or (dt == np.float32 and fmt.bits > 32):
        raise ValueError(f"arrays: dtype must be float32 or float64 and hold every {fmt.name} "
                         f"value, got {dt}")
    return hnp.arrays(dt, shape, elements=representable(
        fmt, allow_nan=allow_nan, allow_infinity=allow_infinity))


def _near(dt: np.dtype[Any], v: float, steps: int) -> float:
    """``v`` in ``dt``, moved ``steps`` representable neighbours up (or down if negative)."""
    with np.errstate(over="ignore"):  # a landmark beyond the dtype's range is inf
        x = dt.type(v)
        direction = dt.type(np.inf) if steps > 0 else dt.type(-np.inf)
        for _ in range(abs(steps)):
            x = np.nextafter(x, direction)
    return float(x)


def _nan_payloads(st: Any, dt: np.dtype[Any]) -> Any:
    """Strategy of NaNs of ``dt``, quiet and signalling, of either sign, with every payload.

    Built from bit patterns and kept as ``dt`` scalars: a float32 signalling NaN passed
    through a Python float comes back quiet (0x7f800001 -> 0x7fc00001), and that lost the
    one input a truncating cast turns into infinity."""
    ubits = np.uint32 if dt == np.float32 else np.uint64
    width = dt.itemsize * 8
    mant_bits = int(np.finfo(dt).nmant)
    nan_exp = ((1 << (width - 1 - mant_bits)) - 1) << mant_bits  # all-ones exponent
    sign = st.sampled_from([0, 1 << (width - 1)])
    payload = st.integers(1, (1 << mant_bits) - 1)  # 0 would be infinity
    return st.builds(lambda s, p: np.array([s | nan_exp | p], dtype=ubits).view(dt)[0],
                     sign, payload)


def hard_cases(fmt: str | Format, *, dtype: Any = np.float32) -> Any:
    """Strategy of inputs that stress a cast to ``fmt``, as float32 or float64 scalars.

    Draws: midpoints between neighbours of ``fmt`` (ties) and the inputs up to two steps
    of ``dtype`` either side; ``fmt``'s landmarks (±0, the smallest subnormal and half of
    it, the smallest normal, the maximum and the overflow thresholds) and ``dtype``'s own
    extremes, each with neighbours; ±inf; NaNs of either sign, quiet and signalling, with
    every payload (as bit patterns of ``dtype``: a signalling float32 NaN stays
    signalling).

    Raises:
        ValueError: ``dtype`` is not float32 or float64.
    """
    st = hypothesis_st()
    fmt = get_format(fmt)
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise ValueError(f"hard_cases dtype must be float32 or float64, got {dt}")

    def near(v: float, steps: int) -> float:
        return _near(dt, v, steps)

    rep = representable(fmt)

    @st.composite
    def midpoint(draw: Any) -> float:
        a = abs(draw(rep))
        code = int(np.asarray(__import__("ampref").encode(np.float32(a), fmt)))
        nxt = float(decode(np.array([min(code + 1, fmt.max_code)], dtype=np.uint32), fmt)[0])
        mid = (a + nxt) / 2 if nxt > a else a + (a - float(decode(
            np.array([max(code - 1, 0)], dtype=np.uint32), fmt)[0])) / 2
        sign = draw(st.sampled_from([1.0, -1.0]))
        return sign * near(mid, draw(st.integers(-2, 2)))

    landmarks = [0.0, -0.0, fmt.tiny, fmt.smallest_subnormal, fmt.smallest_subnormal / 2,
                 fmt.max, fmt.max * (1 + fmt.eps / 2), fmt.max * (1 + fmt.eps / 4),
                 fmt.tiny * (1 - fmt.eps / 2), float(np.finfo(dt).max), float(np.finfo(dt).tiny)]
    boundary = st.builds(lambda v, k, s: s * near(v, k), st.sampled_from(landmarks),
                         st.integers(-2, 2), st.sampled_from([1.0, -1.0]))
    nan_payload = _nan_payloads(st, dt)
    specials = st.sampled_from([np.inf, -np.inf, np.nan])
    inner = st.one_of(midpoint(), boundary, nan_payload, specials)

    # a named composite, so that the strategy prints as hard_cases('e4m3fn', 'float32')
    # instead of its chain of lambdas
    @st.composite
    def hard_cases(draw: Any, fmt: str, dtype: str) -> Any:
        return dt.type(draw(inner))  # a dt scalar passes through with its bits

    return hard_cases(fmt.name, dt.name)
