"""Block-scaled quantizers under hypothesis (REC-IDN-002): :func:`block_cases` draws
matrices whose blocks are the hard cases of block scaling, and
:func:`assert_block_matches` checks a user's quantizer against
:func:`ampref.recipes.quantize` on them.

Each block is one of: seeded normal values over a chosen binade; exact midpoints of the
element grid under a power-of-two scale (the element rounding's ties); a block maximum at,
just below or just above a binade edge of the element format's max; a maximum with an
odd 4-bit mantissa (where the rounding scale rules part ways); one outlier among small
values; values over 34 binades under one maximum (down to the element subnormals); an
all-zero block (±0); a NaN or ±inf in one element; an amax near the scale format's
limits. A block is a function of a few small integers, so hypothesis shrinks a failure
by shrinking integers, not float arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.table import get_format
from ampref.recipes.catalog import get_recipe
from ampref.recipes.identify import element_midpoints, identify_block
from ampref.recipes.quantize import quantize

from .assertions import assert_bitwise_equal
from .strategies import check_shape, hypothesis_st

__all__ = ["KINDS", "assert_block_matches", "block_cases", "block_width", "make_block"]

#: the block families, simplest first (hypothesis shrinks toward the first)
KINDS = ("normal", "midpoint", "edge", "mantissa", "outlier", "wide", "zero", "special",
         "scale_limit")


def block_width(recipe: str) -> int:
    """The width of one scaling block along the last axis (32 for per-tensor recipes)."""
    r = get_recipe(recipe)
    return int(r.default_tile[1] or 32)


def make_block(kind: str, width: int, element: str, seed: int, k: int, j: int,
               pos: int) -> npt.NDArray[np.float32]:
    """One block of ``width`` float32 values of family ``kind`` for an ``element``-format
    recipe: ``seed`` draws the background, ``k`` a binade offset, ``j`` a small variant,
    ``pos`` the special element's position (each read modulo its range)."""
    rng = np.random.default_rng(seed)
    pos %= width
    sign = -1.0 if j < 0 else 1.0
    emax = get_format(element).max
    with np.errstate(over="ignore"):
        if kind == "normal":
            return (rng.standard_normal(width) * 2.0 ** k).astype(np.float32)
        if kind == "midpoint":  # ties of the element rounding when the scale is 2^k
            mids = element_midpoints(element)
            b = rng.choice(mids, width) * rng.choice([-1.0, 1.0], width)
            b[pos] = sign * emax
            return (b * 2.0 ** k).astype(np.float32)
        if kind in ("edge", "mantissa"):
            peak = np.float32(emax * 2.0 ** k) if kind == "edge" else \
                np.float32(emax * (1 + (2 * (abs(j) % 8) + 1) / 16) * 2.0 ** k)
            if kind == "edge":  # j in -2..2: that many float32 neighbours away
                for _ in range(abs(j) % 3):
                    peak = np.nextafter(peak, np.float32(np.inf if j > 0 else 0))
            b = rng.uniform(-1, 1, width).astype(np.float32) * peak / 2
            b[pos] = sign * peak
            return b.astype(np.float32)
        if kind == "outlier":
            b = rng.uniform(-1e-3, 1e-3, width)
            b[pos] = sign * 300.0 * 2.0 ** k
            return b.astype(np.float32)
        if kind == "wide":
            b = 300.0 * 2.0 ** k * np.exp2(-rng.uniform(0, 34, width)) * rng.choice([-1, 1], width)
            b[pos] = 300.0 * 2.0 ** k
            return b.astype(np.float32)
        if kind == "zero":
            return np.full(width, -0.0 if j < 0 else 0.0, np.float32)
        if kind == "special":
            b = rng.standard_normal(width).astype(np.float32)
            b[pos] = (np.nan, np.inf, -np.inf)[abs(j) % 3]
            return b
        # scale_limit: amax near E8M0's smallest scale, or near float32's top
        top = 126 - (abs(k) % 4) if j >= 0 else -130 + (abs(k) % 4)
        return (rng.uniform(-1, 1, width) * 2.0 ** top).astype(np.float32)


def block_cases(recipe: str, *, rows: tuple[int, int] = (1, 3),
                blocks: tuple[int, int] = (1, 3)) -> Any:
    """Strategy of float32 (M, K) matrices for ``recipe``: M in ``rows``, K a number of
    blocks in ``blocks`` times :func:`block_width`, every block one of :data:`KINDS`.

    Raises:
        TypeError / ValueError: ``rows`` or ``blocks`` not a pair of ints 1 <= lo <= hi;
            an unknown recipe.
    """
    st = hypothesis_st()
    for name, pair in (("rows", rows), ("blocks", blocks)):
        lo_hi = check_shape(name, pair)
        if len(lo_hi) != 2 or not 1 <= lo_hi[0] <= lo_hi[1]:
            raise ValueError(f"block_cases: {name} must be a pair (lo, hi) with 1 <= lo <= hi, "
                             f"got {pair!r}")
    width = block_width(recipe)
    one = st.builds(make_block, st.sampled_from(KINDS), st.just(width),
                    st.just(get_recipe(recipe).element),
                    st.integers(0, 2**16), st.integers(-24, 24), st.integers(-2, 2),
                    st.integers(0, width - 1))

    @st.composite
    def block_cases(draw: Any, recipe: str) -> npt.NDArray[np.float32]:
        m = draw(st.integers(*rows))
        nb = draw(st.integers(*blocks))
        return np.stack([np.concatenate([draw(one) for _ in range(nb)]) for _ in range(m)])

    return block_cases(get_recipe(recipe).name)


def assert_block_matches(fn: Callable[[npt.NDArray[np.float32]], Any], recipe: str, *,
                         profile: str = "te", max_examples: int = 200,
                         rows: tuple[int, int] = (1, 3), blocks: tuple[int, int] = (1, 3),
                         **options: Any) -> None:
    """Check a block quantizer ``fn`` (float32 (M, K) -> dequantized float32 (M, K))
    against ``ampref.recipes.quantize(x, recipe, profile=profile, **options)`` on
    :func:`block_cases`, bit for bit (any NaN equals any NaN).

    On a failure hypothesis shrinks to a minimal matrix; the error names each differing
    element by (row, (block, element)) with its input, result and expected value in hex,
    then :func:`identify_block`'s answer: the profile and scale rule ``fn`` follows, or
    the closest one and its first miss.

    Raises:
        AssertionError: ``fn`` differs (message as above).
        ValueError: unknown recipe, profile or option (from the reference).
    """
    hypothesis_st()  # a clear ImportError without hypothesis
    from hypothesis import given, settings

    width = block_width(recipe)
    quantize(np.zeros((1, width), np.float32), recipe, profile=profile, **options)  # options ok

    @settings(max_examples=max_examples, deadline=None, database=None, derandomize=True)
    @given(block_cases(recipe, rows=rows, blocks=blocks))
    def check(x: npt.NDArray[np.float32]) -> None:
        with np.errstate(all="ignore"):
            want = quantize(x, recipe, profile=profile, **options).values
            got = np.asarray(fn(x.copy()), dtype=np.float32)
        if got.shape != want.shape:
            raise AssertionError(f"fn returned shape {got.shape} for input shape {x.shape}")
        assert_bitwise_equal(got, want, nan="any", inputs=x, block=width,
                             msg=f"{recipe} vs quantize(profile={profile!r}"
                                 + "".join(f", {k}={v!r}" for k, v in options.items()) + ")")

    try:
        check()
    except AssertionError as e:
        raise AssertionError(f"{e}\n{_identified(fn, recipe)}") from None


def _identified(fn: Callable[[npt.NDArray[np.float32]], Any], recipe: str) -> str:
    if get_recipe(recipe).family == "delayed":
        return "(identify_block covers block-scaled and current-scaled recipes only)"
    try:
        return str(identify_block(fn, recipe))
    except (ValueError, TypeError) as e:  # fn fails on the battery's shapes
        return f"(identify_block could not run fn on its battery: {e})"
