"""GEMMs and loss-scale updates under hypothesis (ACC-IDN-002, SCL-IDN-002):
:func:`assert_gemm_matches` checks ``fn(a, b)`` against ``ampref.matmul`` under an
accumulation model, :func:`assert_scaler_matches` checks a scale-update rule against a
framework profile; failures shrink to a minimal case, shown in hex, with the model or
profile that does explain ``fn`` (:func:`identify_gemm`, :func:`identify_scaler`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.accumulation.identify import identify_gemm
from ampref.accumulation.models import matmul
from ampref.formats.cast import decode, quantize
from ampref.formats.table import get_format
from ampref.scaling.identify import identify_scaler, trajectory
from ampref.scaling.profiles import PROFILES

from .assertions import assert_bitwise_equal
from .strategies import check_shape, hypothesis_st

__all__ = ["assert_gemm_matches", "assert_scaler_matches", "operands"]


def operands(fmt: str, shape: tuple[int, int]) -> Any:
    """Strategy of float64 (shape) arrays of finite ``fmt`` values: either all within a
    window of 13 binades around a drawn exponent (where the order and grouping of the
    additions decide the bits), or drawn as codes over every binade (subnormals, ±0,
    huge and tiny values). Both shrink toward zeros."""
    st = hypothesis_st()
    from hypothesis.extra import numpy as hnp

    if len(check_shape("shape", shape)) != 2:
        raise ValueError(f"operands: shape must be a pair (M, N), got {shape!r}")
    f = get_format(fmt)
    p = f.mantissa_bits + 1
    n = int(np.prod(shape))
    codes = hnp.arrays(np.uint32, shape, elements=st.integers(0, (1 << f.bits) - 1))
    anywhere = codes.map(lambda c: np.nan_to_num(np.asarray(decode(c, f), np.float64),
                                                 nan=0.0, posinf=0.0, neginf=0.0))

    @st.composite
    def windowed(draw: Any) -> npt.NDArray[np.float64]:
        e0 = draw(st.integers(-8, 8))
        mant = draw(hnp.arrays(np.int64, n, elements=st.integers(-(2**p) + 1, 2**p - 1)))
        de = draw(hnp.arrays(np.int64, n, elements=st.integers(-6, 6)))
        v = mant * np.exp2((e0 + de - p).astype(np.float64))  # p bits: exact unless the
        with np.errstate(over="ignore"):                      # format's range cuts it
            q = quantize(v, f, saturate=True)
        return np.asarray(q, np.float64).reshape(shape)

    return st.one_of(windowed(), anywhere)


def _row_hex(v: npt.NDArray[Any]) -> str:
    return " ".join(float(x).hex() for x in v.reshape(-1))


def assert_gemm_matches(fn: Callable[[Any, Any], Any], *, input_format: str,
                        accumulation: str, output_format: str = "float32",
                        rules: str | None = None, max_examples: int = 100,
                        max_k: int = 48) -> None:
    """Check ``fn(a, b)`` (float64 arrays of ``input_format`` values, (M, K) and (K, N)
    -> float32 (M, N)) against ``ampref.accumulation.matmul`` under ``accumulation`` on
    hypothesis-drawn operands (M, N in 1..3, K in 1..``max_k``), bit for bit.

    A failure shrinks to minimal operands and shows each differing element's position,
    result and expected value in hex, its row of A and column of B (``float.hex``), then
    :func:`identify_gemm`'s answer.

    Raises:
        AssertionError: ``fn`` differs (message as above).
    """
    st = hypothesis_st()
    from hypothesis import given, settings

    def reference(a: Any, b: Any) -> npt.NDArray[np.float32]:
        return np.asarray(matmul(a, b, input_format=input_format, output_format=output_format,
                                 accumulation=accumulation, rules=rules), np.float32)

    reference(np.zeros((1, 1)), np.zeros((1, 1)))  # a bad model or format fails here

    @st.composite
    def pair(draw: Any) -> tuple[Any, Any]:
        m, k, n = draw(st.integers(1, 3)), draw(st.integers(1, max_k)), draw(st.integers(1, 3))
        return draw(operands(input_format, (m, k))), draw(operands(input_format, (k, n)))

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True)
    @given(pair())
    def check(ab: tuple[Any, Any]) -> None:
        a, b = ab
        with np.errstate(all="ignore"):
            want = reference(a, b)
            got = np.asarray(fn(a.copy(), b.copy()), np.float32)
        try:
            assert_bitwise_equal(got, want, nan="any",
                                 msg=f"GEMM vs matmul(accumulation={accumulation!r})")
        except AssertionError as e:
            bad = (got.view(np.uint32) != want.view(np.uint32)) & ~(np.isnan(got)
                                                                    & np.isnan(want))
            i, j = (int(v) for v in np.argwhere(bad)[0])
            raise AssertionError(f"{e}\n  A[{i}, :] = {_row_hex(a[i])}\n  B[:, {j}] = "
                                 f"{_row_hex(b[:, j])}") from None

    try:
        check()
    except AssertionError as e:
        raise AssertionError(f"{e}\n{identify_gemm(fn, input_format, output_format=output_format)}"
                             ) from None


def assert_scaler_matches(fn: Callable[[list[bool]], Sequence[float]], profile: str, *,
                          init_scale: float = 2.0**16, growth_interval: int = 3,
                          max_examples: int = 200) -> None:
    """Check a loss-scale update rule ``fn(found_infs) -> scales`` (the scale after each
    update; a shorter list: the scaler raised) against ``profile``'s rules at
    ``init_scale`` and ``growth_interval`` on hypothesis-drawn overflow sequences (runs of
    clean and overflowing steps), compared as float64 bits.

    A failure shrinks to a minimal sequence and shows the first differing update, then
    :func:`identify_scaler`'s answer.

    Raises:
        AssertionError: ``fn`` differs (message as above).
        ValueError: unknown profile (choices named).
    """
    st = hypothesis_st()
    from hypothesis import given, settings

    if profile not in PROFILES:
        raise ValueError(f"unknown loss-scale profile {profile!r}; choose one of "
                         f"{', '.join(PROFILES)}")
    cfg = replace(PROFILES[profile].config, init_scale=init_scale,
                  growth_interval=growth_interval)
    runs = st.lists(st.tuples(st.booleans(), st.integers(1, 2 * growth_interval + 2)),
                    max_size=24)

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True)
    @given(runs)
    def check(rs: list[tuple[bool, int]]) -> None:
        flags = [f for f, n in rs for _ in range(n)]
        got = [float(v) for v in fn(list(flags))]
        want = trajectory(cfg, flags)
        for i in range(max(len(got), len(want))):
            g = got[i] if i < len(got) else None
            w = want[i] if i < len(want) else None
            if g != w or (g is not None and w is not None and
                          np.float64(g).view(np.uint64) != np.float64(w).view(np.uint64)):
                raise AssertionError(
                    f"scale update vs profile {profile!r}: update {i + 1} (found_inf="
                    f"{flags[i]}) after {sum(flags[:i])} overflows in {i} updates gave {g!r}, "
                    f"the profile gives {w!r}; flags (1 = overflow): "
                    f"{''.join('1' if f else '0' for f in flags[:i + 1])}")

    try:
        check()
    except AssertionError as e:
        answer = identify_scaler(fn, init_scale=init_scale, growth_interval=growth_interval)
        raise AssertionError(f"{e}\n{answer}") from None
