"""Which profile and scale rule does a block quantizer follow? (REC-IDN-001)

Block-scaled quantizers disagree where a reference matters: E8M0 scales rounded down,
up, to nearest or by RCEIL; the amax NaN rule; FP4 NaN and -0 encodings; the NVFP4
two-level scales. :func:`identify_block` runs a fixed battery of matrices through a
black-box quantizer (float32 (M, K) -> dequantized float32 (M, K)) and compares the
result, bit for bit, with every profile that ships the recipe and every scale rule the
profile offers. It names every matching (profile, rule), or the closest one and the
first element it does not explain with its row, block and element index, in hex.
Recipes with a per-tensor scale (``fp8_current``, ``nvfp4``) get each row of the
battery as a tensor of its own.

The battery's rows: seeded normal values over many binades; block maxima exactly at,
just below and just above binade edges and at the element format's max times a power
of two; maxima with every 4-bit mantissa; one outlier in a block of small values;
elements over 34 binades under one maximum (down to the element format's subnormals,
where scales one binade apart part ways); an all-zero block; a NaN and an inf in one
element; exact midpoints of the element grid under a power-of-two scale (the ties of the
element rounding); amax near the scale format's limits (tiny and huge). K is 128, a multiple of
every recipe's tile width.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import decode
from ampref.formats.table import get_format

from .catalog import PROFILES, get_recipe
from .quantize import quantize

__all__ = ["BlockIdentification", "block_battery", "candidates", "element_midpoints",
           "identify_block", "reference"]

K = 128


@dataclass(frozen=True, kw_only=True)
class BlockIdentification:
    """Matching (profile, options) pairs, else the closest and its first miss."""

    recipe: str
    shape: tuple[int, int]
    matches: tuple[str, ...]
    closest: str
    mismatches: int
    #: (row, block, element in block, input hex, got, want) of the first miss
    first: tuple[int, int, int, str, float, float] | None = None

    def __str__(self) -> str:
        head = f"identify_block({self.recipe}, {self.shape[0]}x{self.shape[1]}): "
        if self.matches:
            return head + "matches " + "; ".join(self.matches)
        r, b, e, h, got, want = self.first or (0, 0, 0, "", float("nan"), float("nan"))
        return (head + f"no profile explains every element; closest: {self.closest} "
                f"({self.mismatches} mismatches); first: row {r}, block {b}, element {e}, "
                f"input {h} gave {got!r}, that profile gives {want!r}")


def element_midpoints(element: str) -> npt.NDArray[np.float64]:
    """The midpoints between consecutive nonnegative finite values of a format (the ties
    of rounding into it)."""
    f = get_format(element)
    grid = np.unique(np.abs(np.asarray(decode(np.arange(1 << f.bits, dtype=np.uint32), f),
                                       np.float64)))
    grid = grid[np.isfinite(grid)]
    return (grid[:-1] + grid[1:]) / 2


def block_battery(recipe: str, *, seed: int = 0) -> npt.NDArray[np.float32]:
    """The fixed adversarial matrix (float32, rows x 128) for ``recipe``."""
    r = get_recipe(recipe)
    emax = get_format(r.element).max
    rng = np.random.default_rng(seed)
    rows = [rng.standard_normal(K) * 2.0 ** e for e in range(-24, 25, 3)]
    for k in (-10, 0, 7):
        for peak in (2.0**k, 2.0**k * (1 - 2**-24), 2.0**k * (1 + 2**-23), emax * 2.0**k,
                     emax * 2.0**k * (1 + 2**-23), emax * 2.0**k * (1 - 2**-24)):
            row = rng.uniform(-1, 1, K) * peak / 2
            row[::16] = peak  # the maximum of every 16-, 32- and 128-wide block
            rows.append(row)
    # maxima with every 4-bit mantissa: where the rounding scale rules (even, ceil,
    # rceil) part ways for elements with few mantissa bits
    for j in range(1, 16, 2):
        row = rng.uniform(-1, 1, K) * 0.5
        row[::32] = emax * (1 + j / 16)
        rows.append(row)
    # a wide dynamic range under one maximum: elements reach the element format's
    # subnormals, where scales one binade apart round differently
    for peak in (300.0, 0.7):
        wide = peak * np.exp2(-rng.uniform(0, 34, K)) * rng.choice([-1.0, 1.0], K)
        wide[::32] = peak
        rows.append(wide)
    small = rng.uniform(-1e-3, 1e-3, K)
    small[5::32] = 300.0  # one outlier per 32-wide block
    rows.append(small)
    rows.append(np.zeros(K))
    special = rng.standard_normal(K)
    special[3], special[40] = np.nan, np.inf
    rows.append(special)
    # exact ties of the element rounding under a power-of-two scale (block max = the
    # element's max times 2^k): half-even, half-away and truncation part ways here
    mids = element_midpoints(r.element)
    for k in (0, -3):
        row = rng.choice(mids, K) * rng.choice([-1.0, 1.0], K)
        row[::16] = emax
        rows.append(row * 2.0**k)
    rows.append(rng.uniform(-1, 1, K) * 2.0**-130)   # amax near E8M0's smallest scale
    rows.append(rng.uniform(-1, 1, K) * 2.0**126)    # near float32's and E8M0's top
    return np.asarray(rows, dtype=np.float32)


def candidates(recipe: str) -> list[tuple[str, dict[str, Any]]]:
    r = get_recipe(recipe)
    out: list[tuple[str, dict[str, Any]]] = []
    for p in PROFILES.values():
        if r.name not in p.recipes:
            continue
        if r.family == "mx":
            out += [(f"profile={p.name}, scale_rule={rule}", {"profile": p.name,
                                                               "scale_rule": rule})
                    for rule in p.mx_rules]
        elif r.family in ("fp8_block", "per_tensor"):  # scales a power of two, or not
            out += [(f"profile={p.name}, pow2={pow2}", {"profile": p.name, "pow2": pow2})
                    for pow2 in (False, True)]
        else:
            out.append((f"profile={p.name}", {"profile": p.name}))
    return out


def reference(recipe: str, opts: dict[str, Any]
               ) -> Callable[[npt.NDArray[np.float32]], npt.NDArray[np.float32]]:
    """The dequantized values of ampref's quantizer under one (profile, rule)."""
    def run(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        return quantize(m, recipe, **opts).values
    return run


def _tensor_scaled(recipe: str) -> bool:
    """Recipes with a per-tensor scale see each battery row as its own tensor, so that an
    all-zero, an infinite and a tiny tensor each reach the scale rules."""
    r = get_recipe(recipe)
    return r.global_scale or r.family == "per_tensor"


def _run(fn: Callable[[npt.NDArray[np.float32]], Any], x: npt.NDArray[np.float32], *,
         per_row: bool) -> npt.NDArray[np.float32]:
    with np.errstate(all="ignore"):
        if not per_row:
            return np.asarray(fn(x.copy()), dtype=np.float32)
        rows = [np.asarray(fn(x[i:i + 1].copy()), dtype=np.float32) for i in range(len(x))]
    if any(r.shape != (1, x.shape[1]) for r in rows):
        bad = next(r.shape for r in rows if r.shape != (1, x.shape[1]))
        raise ValueError(f"fn returned shape {bad} for input shape {(1, x.shape[1])}")
    return np.concatenate(rows)


def _same(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> npt.NDArray[np.bool_]:
    return (a.view(np.uint32) == b.view(np.uint32)) | (np.isnan(a) & np.isnan(b))


def identify_block(fn: Callable[[npt.NDArray[np.float32]], Any], recipe: str, *,
                   seed: int = 0) -> BlockIdentification:
    """Run ``fn`` (float32 (M, 128) -> dequantized float32 of that shape) on the battery
    and name the profiles (and MX scale rules) of :func:`ampref.recipes.quantize` it
    matches.

    Raises:
        TypeError: ``fn`` is not callable.
        ValueError: unknown recipe (choices named), ``fn``'s result of another shape.
    """
    if not callable(fn):
        raise TypeError(f"identify_block needs a callable, got {type(fn).__name__}")
    r = get_recipe(recipe)
    if r.family == "delayed":
        raise ValueError("identify_block covers block-scaled and current-scaled recipes; "
                         "fp8_delayed depends on the amax history (use fp8_current)")
    x = block_battery(r.name, seed=seed)
    got = _run(fn, x, per_row=_tensor_scaled(r.name))
    if got.shape != x.shape:
        raise ValueError(f"fn returned shape {got.shape} for input shape {x.shape}")
    width = r.default_tile[1] or K
    best: tuple[int, str, Any] | None = None
    matches = []
    for label, opts in candidates(r.name):
        want = _run(reference(r.name, opts), x, per_row=_tensor_scaled(r.name))
        ok = _same(got, want)
        bad = int((~ok).sum())
        if bad == 0:
            matches.append(label)
        if best is None or bad < best[0]:
            best = (bad, label, (ok, want))
    if best is None:
        raise ValueError(f"no profile ships recipe {r.name!r}")
    bad, closest, (ok, want) = best
    first = None
    if bad:
        i, j = (int(v) for v in np.argwhere(~ok)[0])
        first = (i, j // width, j % width, f"0x{int(x[i, j:j + 1].view(np.uint32)[0]):08x}",
                 float(got[i, j]), float(want[i, j]))
    return BlockIdentification(recipe=r.name, shape=(int(x.shape[0]), K),
                               matches=tuple(matches), closest=closest, mismatches=bad,
                               first=first)
