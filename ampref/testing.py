"""Helpers for property tests of numeric code: hypothesis strategies and bitwise asserts.

Strategies (need the ``test`` extra, i.e. hypothesis):

* :func:`representable` / :func:`arrays`: values exactly representable in a format,
  drawn as codes so subnormals, ±0, ±max and (optionally) inf/NaN are all reachable;
* :func:`hard_cases`: the inputs that break casts: rounding midpoints and their
  float32/float64 neighbours, the subnormal boundary, max and the overflow threshold,
  signed zeros, NaN payloads.

Assertions (no hypothesis needed): :func:`assert_bitwise_equal`,
:func:`assert_within_ulps`; failures print the first differing elements in hex.

Identification (no hypothesis needed): :func:`identify` names the rounding rule a
black-box cast follows (mode, saturation, subnormals, double rounding via float32);
:func:`identify_block` the profile and scale rule of a block quantizer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import decode
from ampref.formats.identify import Identification, identify
from ampref.recipes.identify import BlockIdentification, identify_block
from ampref.formats.table import Format, get_format

__all__ = ["representable", "arrays", "hard_cases", "assert_bitwise_equal",
           "assert_within_ulps", "assert_matches", "ordinal", "identify", "Identification",
           "identify_block", "BlockIdentification"]

_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64, 1: np.uint8}


def _bits(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    return np.ascontiguousarray(a).view(_UINT[a.dtype.itemsize])


def _hex(v: Any, width: int) -> str:
    return f"0x{int(v):0{width * 2}x}"


def assert_bitwise_equal(actual: npt.ArrayLike, desired: npt.ArrayLike, *,
                         nan: str = "bitwise", max_report: int = 5, msg: str = "",
                         inputs: npt.ArrayLike | None = None, block: int | None = None) -> None:
    """Assert two arrays hold identical bit patterns (same dtype and shape).

    Args:
        nan: ``"bitwise"`` (NaN payloads and signs must match too) or ``"any"`` (any NaN
            equals any NaN; everything else still bitwise).
        msg: a prefix for the failure message (joined with ": ").
        inputs: the array that produced ``actual`` (same shape): each reported element
            shows its input in hex and as ``float.hex`` (``0x1.000002p-119``: the
            binade and the bits that decide the rounding, which decimal hides).
        block: block width along the last axis: positions show (block, element).

    Raises:
        AssertionError: with count, positions (index tuple, block and element) and the
            hex and exact values of the first differences.
        ValueError: unknown ``nan`` policy, or ``inputs`` of another shape.
    """
    if nan not in ("bitwise", "any"):
        raise ValueError(f"nan must be 'bitwise' or 'any', got {nan!r}")
    a, d = np.asarray(actual), np.asarray(desired)
    for name, arr in (("actual", a), ("desired", d)):
        if arr.dtype.kind not in "fiub" or arr.dtype.itemsize not in _UINT:
            raise TypeError(f"assert_bitwise_equal compares real numbers or codes of 1, 2, 4 or "
                            f"8 bytes; {name} has dtype {arr.dtype}")
    # callers may end msg with their own ": "; one separator either way
    head = f"{msg.rstrip(': ')}: " if msg.strip(": ") else ""
    if a.dtype != d.dtype or a.shape != d.shape:
        raise AssertionError(f"{head}dtype/shape differ: actual {a.dtype}{a.shape}, "
                             f"desired {d.dtype}{d.shape}")
    x = None if inputs is None else np.asarray(inputs)
    if x is not None and x.shape != a.shape:
        raise ValueError(f"inputs has shape {x.shape}, the outputs {a.shape}")
    ab, db = _bits(a).reshape(-1), _bits(d).reshape(-1)
    bad = ab != db
    if nan == "any" and a.dtype.kind == "f":
        bad &= ~(np.isnan(a.reshape(-1)) & np.isnan(d.reshape(-1)))
    if not bad.any():
        return
    idx = np.flatnonzero(bad)
    rows = [_report_row(int(i), a, d, x, block) for i in idx[:max_report]]
    raise AssertionError(f"{head}{idx.size} of {ab.size} elements differ bitwise:\n"
                         + "\n".join(rows))


def _exact(v: Any) -> str:
    """A value in hex bits and exactly: float.hex for floats, the integer otherwise."""
    arr = np.asarray(v)
    bits = _hex(_bits(arr.reshape(1))[0], arr.dtype.itemsize)
    return f"{bits} ({float(arr).hex() if arr.dtype.kind == 'f' else int(arr)})"


def _report_row(i: int, a: Any, d: Any, x: Any, block: int | None) -> str:
    pos = tuple(int(k) for k in np.unravel_index(i, a.shape)) if a.ndim else ()
    where = f"at {pos}"
    if block and a.ndim:
        where += f" [block {pos[-1] // block}, element {pos[-1] % block}]"
    src = "" if x is None else f" input {_exact(x.reshape(-1)[i])};"
    return (f"  {where}:{src} actual {_exact(a.reshape(-1)[i])} desired "
            f"{_exact(d.reshape(-1)[i])}")


def ordinal(x: npt.ArrayLike, fmt: str | Format | None = None) -> npt.NDArray[np.int64]:
    """Position of each value on the ordered number line of ``fmt`` (or x's dtype).

    Adjacent values differ by 1; +0 and -0 share position 0. For a format, every value
    must be exactly representable in it (ValueError naming the first that is not).
    """
    arr = np.asarray(x)
    if fmt is None:
        if arr.dtype not in (np.float32, np.float64):
            raise TypeError(f"ordinal without fmt needs float32/float64, got {arr.dtype}")
        u = _bits(arr)
        top = u.dtype.type(1) << u.dtype.type(arr.dtype.itemsize * 8 - 1)
        mag = (u & (top - u.dtype.type(1))).astype(np.int64)
        return np.where((u & top) != 0, -mag, mag)
    fmt = get_format(fmt)
    from ampref.formats.cast import encode

    vals = arr.astype(np.float32)
    codes = encode(vals, fmt).astype(np.int64)
    back = decode(codes, fmt)
    exact = (back == vals) | (np.isnan(back) & np.isnan(vals))
    if not exact.all():
        i = int(np.flatnonzero(~exact.reshape(-1))[0])
        raise ValueError(f"element {i} ({vals.reshape(-1)[i]!r}) is not representable in "
                         f"{fmt.name}")
    if not fmt.is_signed:
        return codes
    sign = np.int64(fmt.sign_mask)
    mag = codes & (sign - 1)
    return np.where(codes & sign, -mag, mag)


def assert_within_ulps(actual: npt.ArrayLike, desired: npt.ArrayLike, ulps: int,
                       fmt: str | Format | None = None, *, max_report: int = 5,
                       msg: str = "") -> None:
    """Assert |ordinal(actual) - ordinal(desired)| <= ulps elementwise.

    Distances are counted on ``fmt``'s grid (or the arrays' own float type). NaN must
    meet NaN; inf counts as the step after max.
    """
    a, d = np.asarray(actual), np.asarray(desired)
    if a.shape != d.shape:
        raise AssertionError(f"{msg}shapes differ: {a.shape} vs {d.shape}")
    an, dn = np.isnan(a), np.isnan(d)
    both = ~(an | dn)
    dist = np.zeros(a.shape, dtype=np.int64)
    dist[both] = np.abs(ordinal(a[both], fmt) - ordinal(d[both], fmt))
    bad = (an != dn) | (dist > ulps)
    if not bad.any():
        return
    idx = np.flatnonzero(bad.reshape(-1))
    w = a.dtype.itemsize
    ab, db = _bits(a).reshape(-1), _bits(d).reshape(-1)
    rows = [f"  [{i}] actual {_hex(ab[i], w)} ({a.reshape(-1)[i]!r}) desired {_hex(db[i], w)} "
            f"({d.reshape(-1)[i]!r}) distance {dist.reshape(-1)[i]} ulps" for i in idx[:max_report]]
    raise AssertionError(f"{msg}{idx.size} of {a.size} elements are more than {ulps} ulps "
                         f"apart:\n" + "\n".join(rows))


# ----------------------------------------------------------------------------------
# hypothesis strategies
# ----------------------------------------------------------------------------------
def assert_matches(fn: Any, fmt: str | Format, *, rounding: str = "nearest_even",
                   saturate: bool = False, subnormals: bool = True, via: str | None = None,
                   max_examples: int = 300, max_size: int = 64) -> None:
    """Check a cast ``fn`` (float64 array -> values of ``fmt``) against
    :func:`ampref.quantize` with the given rule on hypothesis-drawn arrays of
    :func:`hard_cases` (midpoints and their neighbours, subnormal and overflow edges,
    signed zeros, NaN payloads); NaN results compare as NaN.

    On a failure, hypothesis shrinks to a minimal array, and the error shows each
    differing element's position, input, result and expected value in hex and exactly,
    followed by :func:`identify`'s answer: the rule ``fn`` follows instead, or the first
    input no known rule explains.

    Raises:
        AssertionError: ``fn`` differs (message as above).
    """
    st = _st()
    from hypothesis import given, settings
    from hypothesis.extra import numpy as hnp

    from ampref.formats.cast import quantize

    f = get_format(fmt)
    elems = hard_cases(f, dtype=np.float64)

    @settings(max_examples=max_examples, deadline=None, database=None)
    @given(hnp.arrays(np.float64, st.integers(1, max_size), elements=elems))
    def check(x: npt.NDArray[np.float64]) -> None:
        with np.errstate(all="ignore"):
            want = quantize(x, f, rounding, saturate=saturate, subnormals=subnormals,
                            via=via).astype(np.float64)
            got = np.asarray(fn(x.copy())).astype(np.float64)
        assert_bitwise_equal(got, want, nan="any", inputs=x,
                             msg=f"cast to {f.name} vs quantize(rounding={rounding!r}, "
                                 f"saturate={saturate}, subnormals={subnormals}, via={via!r})")

    try:
        check()
    except AssertionError as e:
        raise AssertionError(f"{e}\n{identify(fn, f)}") from None


def _st() -> Any:
    try:
        from hypothesis import strategies as st
    except ImportError as e:  # pragma: no cover
        raise ImportError("ampref.testing strategies need hypothesis: pip install "
                          "'ampref[test]'") from e
    return st


def representable(fmt: str | Format, *, allow_nan: bool = False, allow_infinity: bool = False,
                  allow_subnormal: bool = True) -> Any:
    """Strategy of Python floats exactly representable in ``fmt``."""
    st = _st()
    fmt = get_format(fmt)

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
    """Strategy of arrays (float32 by default) of values representable in ``fmt``."""
    _st()  # a clear ImportError without hypothesis
    from hypothesis.extra import numpy as hnp

    return hnp.arrays(dtype, shape, elements=representable(
        fmt, allow_nan=allow_nan, allow_infinity=allow_infinity))


def _near(dt: np.dtype[Any], v: float, steps: int) -> float:
    """``v`` in ``dt``, moved ``steps`` representable neighbours up (or down if negative)."""
    with np.errstate(over="ignore"):  # a landmark beyond the dtype's range is inf
        x = dt.type(v)
        direction = dt.type(np.inf) if steps > 0 else dt.type(-np.inf)
        for _ in range(abs(steps)):
            x = np.nextafter(x, direction)
    return float(x)


def hard_cases(fmt: str | Format, *, dtype: Any = np.float32) -> Any:
    """Strategy of inputs that stress a cast to ``fmt`` (in float32 or float64)."""
    st = _st()
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
    ubits = np.uint32 if dt == np.float32 else np.uint64
    width = dt.itemsize * 8
    exp_bits = 8 if width == 32 else 11
    mant_bits = width - 1 - exp_bits
    quiet_exp = ((1 << exp_bits) - 1) << mant_bits  # all-ones exponent: inf/NaN
    nan_payload = st.integers(1, (1 << mant_bits) - 1).map(
        lambda p: float(np.array([quiet_exp | p], dtype=ubits).view(dt)[0]))
    specials = st.sampled_from([np.inf, -np.inf, np.nan])
    return st.one_of(midpoint(), boundary, nan_payload, specials).map(dt.type)
