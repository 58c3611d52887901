"""One call to check an implementation against the reference: hypothesis draws the hard
cases, the comparison is bitwise, and a failure shows the minimal counterexample in hex
with the rule that explains it."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.identify import identify
from ampref.formats.table import Format, get_format

from .assertions import assert_bitwise_equal
from .strategies import hard_cases, hypothesis_st

__all__ = ["assert_matches"]


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
    st = hypothesis_st()
    from hypothesis import given, settings
    from hypothesis.extra import numpy as hnp

    from ampref.formats.cast import quantize

    f = get_format(fmt)
    elems = hard_cases(f, dtype=np.float64)

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True)
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
