"""Where two implementations of one recipe disagree, element by element, with the rule
responsible (specs/recipes.md REC-CMP-001); a user's quantizer can be one of the sides
(REC-CMP-002)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.common.checks import check_count

from .catalog import PROFILES, get_profile, get_recipe
from .identify import candidates, reference
from .quantize import quantize
from .tiles import Quantized, as_float32

__all__ = ["Comparison", "PairDiff", "compare"]


@dataclass(frozen=True, kw_only=True)
class PairDiff:
    """Differences between the results of profiles ``a`` and ``b`` (REC-CMP-001)."""

    a: str
    b: str
    elements: int           #: elements whose codes differ
    values: int             #: elements whose dequantized float32 bits differ
    scales: int             #: block scales whose codes differ
    global_scale: bool      #: the per-tensor scales differ
    causes: dict[str, int]  #: differing elements per responsible rule (clause IDs)
    first: list[dict[str, Any]] = field(default_factory=list)

    def lines(self) -> list[str]:
        head = (f"{self.a} vs {self.b}: {self.elements} element codes, {self.values} values, "
                f"{self.scales} block scales differ"
                + ("; the per-tensor scale differs" if self.global_scale else ""))
        out = [head] + [f"  {n:>8}  {why}" for why, n in self.causes.items()]
        out += [f"  first: index {d['index']} x={d['x']} codes {d['codes']} values "
                f"{d['values']} ({d['cause']})" for d in self.first]
        return out


@dataclass(frozen=True, kw_only=True)
class Comparison:
    recipe: str
    results: dict[str, Quantized]
    pairs: list[PairDiff]
    skipped: dict[str, str]
    #: the dequantized values of each user implementation, by its name
    user_values: dict[str, npt.NDArray[np.float32]] = field(default_factory=dict)

    def __str__(self) -> str:
        lines = [f"recipe {self.recipe}: {', '.join([*self.results, *self.user_values])}"]
        lines += [f"  {p}: skipped ({why})" for p, why in self.skipped.items()]
        for p in self.pairs:
            lines += p.lines()
        return "\n".join(lines)


def _hex(v: Any) -> str:
    return f"0x{int(np.asarray(v, np.float32).view(np.uint32)):08x}"


def _block_index(q: Quantized, n: int) -> npt.NDArray[np.int64]:
    """Flat index of each element's scale in q.scale_codes."""
    shape = q.codes.shape
    cols = np.arange(n) % shape[-1]
    rows = np.arange(n) // shape[-1]
    r, c = q.tile
    if (r, c) == (0, 0):
        return np.zeros(n, np.int64)
    nb = q.scale_codes.shape[-1]
    return (rows // r) * nb + cols // c


#: per recipe family: (clause of the block-scale rule, the profile field naming its variant)
_SCALE_RULE = {"nvfp4": ("REC-NV4-002", "nvfp4"), "mx": ("REC-MX-001..003", "mx"),
               "fp8_block": ("REC-SCL-001..003", "scale"), "per_tensor": ("REC-SCL-001..003",
                                                                          "scale"),
               "delayed": ("FP8-DEL-002", "scale")}


def _labels(qa: Quantized, qb: Quantized) -> tuple[str, str, str]:
    """(block-scale, special-input, multiplier) cause labels naming both variants."""
    fam = get_recipe(qa.recipe).family
    clause, fieldname = _SCALE_RULE[fam]
    pa, pb = get_profile(qa.profile), get_profile(qb.profile)
    va, vb = getattr(pa, fieldname), getattr(pb, fieldname)
    ra, rb = qa.options.get("scale_rule", pa.mx_rules[0]), qb.options.get("scale_rule",
                                                                          pb.mx_rules[0])
    if fam == "mx":
        va, vb = f"{va} {ra}", f"{vb} {rb}"
    if fam == "fp8_block":
        va += " pow2" if qa.options.get("pow2", pa.block_pow2) else ""
        vb += " pow2" if qb.options.get("pow2", pb.block_pow2) else ""
    scale = f"block scale: {va} vs {vb} rule ({clause})"
    special = (f"NaN/zero encoding: {pa.fp4_nan}/{pa.fp4_negative_zero} vs "
               f"{pb.fp4_nan}/{pb.fp4_negative_zero} (REC-ELM-001)")
    mult = ("per-tensor scale (REC-NV4-001)" if fam == "nvfp4"
            else f"element multiplier: {va} vs {vb} ({clause})")
    return scale, special, mult


def _pair(x: Any, qa: Quantized, qb: Quantized, limit: int) -> PairDiff:
    ca, cb = qa.codes.reshape(-1), qb.codes.reshape(-1)
    va, vb = (q.values.reshape(-1).view(np.uint32) for q in (qa, qb))
    sa, sb = qa.scale_codes.reshape(-1), qb.scale_codes.reshape(-1)
    ga, gb = qa.global_scale, qb.global_scale
    gdiff = not np.array_equal(np.asarray(ga, np.float32).view(np.uint32),
                               np.asarray(gb, np.float32).view(np.uint32)) \
        if ga is not None and gb is not None else (ga is None) != (gb is None)
    bi = _block_index(qa, ca.size)
    sdiff_el = sa[bi] != sb[bi]
    xf = as_float32(x, "compare").reshape(-1)
    special = np.isnan(xf) | (xf == 0)
    l_scale, l_special, l_mult = _labels(qa, qb)
    cause = np.where(sdiff_el, l_scale, np.where(special, l_special, l_mult))
    diff = np.flatnonzero(ca != cb)
    causes: dict[str, int] = {}
    for why in cause[diff]:
        causes[str(why)] = causes.get(str(why), 0) + 1
    first = [{"index": int(i), "x": _hex(xf[i]), "codes": f"0x{ca[i]:02x}/0x{cb[i]:02x}",
              "values": f"{_hex(qa.values.reshape(-1)[i])}/{_hex(qb.values.reshape(-1)[i])}",
              "cause": str(cause[i])} for i in diff[:limit]]
    return PairDiff(a=qa.profile, b=qb.profile, elements=int(diff.size),
                    values=int(np.count_nonzero(va != vb)), scales=int(np.count_nonzero(sa != sb)),
                    global_scale=bool(gdiff), causes=causes, first=first)


def _user_side(fn: Callable[..., Any], x: Any, taken: set[str]
               ) -> tuple[str, npt.NDArray[np.float32]]:
    name = getattr(fn, "__name__", "user")
    name = name if name not in taken and name != "<lambda>" else f"user{len(taken)}"
    x32 = as_float32(x, "compare")
    with np.errstate(all="ignore"):
        v = np.asarray(fn(x32.copy()), dtype=np.float32)
    if v.shape != x32.shape:
        raise ValueError(f"implementation {name!r} returned shape {v.shape} for input shape "
                         f"{x32.shape}; it must return the dequantized values")
    return name, v


def _explain(recipe: str, x: Any, v: npt.NDArray[np.float32], idx: npt.NDArray[np.int64]
             ) -> list[str]:
    """Per element of ``idx``: the (profile, rule) whose value equals ``v``'s, preferring
    the candidates that explain the most of these elements; candidates that explain the
    same elements are named together ("a | b")."""
    flat = v.reshape(-1)[idx]
    hits = []
    for label, opts in candidates(recipe):
        with np.errstate(all="ignore"):
            ref = np.asarray(reference(recipe, opts)(as_float32(x, "compare")),
                             np.float32).reshape(-1)[idx]
        hits.append((label, (ref.view(np.uint32) == flat.view(np.uint32))
                     | (np.isnan(ref) & np.isnan(flat))))
    merged: list[tuple[str, npt.NDArray[np.bool_]]] = []
    for label, hit in hits:  # candidates that explain the same elements share one label
        same = next((i for i, (_, h) in enumerate(merged) if np.array_equal(h, hit)), None)
        if same is None:
            merged.append((label, hit))
        else:
            merged[same] = (f"{merged[same][0]} | {label}", hit)
    hits = sorted(merged, key=lambda h: -int(h[1].sum()))  # stable: catalog order
    out = np.full(idx.size, "no profile gives this value", dtype=object)
    open_ = np.ones(idx.size, bool)
    for label, hit in hits:
        out[open_ & hit] = f"value of {label}"
        open_ &= ~hit
    return [str(c) for c in out]


def _value_pair(x: Any, recipe: str, a: tuple[str, npt.NDArray[np.float32]],
                b: tuple[str, npt.NDArray[np.float32]], limit: int) -> PairDiff:
    """A pair with a user side: values only (a user side has no codes or scales); each
    difference is attributed to the profile and rule whose value the user side gave."""
    (na, va), (nb, vb) = a, b
    fa, fb = va.reshape(-1), vb.reshape(-1)
    diff = np.flatnonzero((fa.view(np.uint32) != fb.view(np.uint32))
                          & ~(np.isnan(fa) & np.isnan(fb)))
    why = _explain(recipe, x, va, diff)
    causes: dict[str, int] = {}
    for w in why:
        causes[f"{na}: {w}"] = causes.get(f"{na}: {w}", 0) + 1
    xf = as_float32(x, "compare").reshape(-1)
    first = [{"index": int(i), "x": _hex(xf[i]), "codes": "-",
              "values": f"{_hex(fa[i])}/{_hex(fb[i])}", "cause": f"{na}: {w}"}
             for i, w in zip(diff[:limit], why[:limit], strict=False)]
    return PairDiff(a=na, b=nb, elements=int(diff.size), values=int(diff.size), scales=0,
                    global_scale=False, causes=causes, first=first)


def compare(x: npt.ArrayLike, recipe: str,
            profiles: tuple[str | Callable[..., Any], ...] = ("te", "torchao", "ocp"),
            *, first: int = 5, **kwargs: Any) -> Comparison:
    """Quantize ``x`` under every profile of ``profiles`` that implements ``recipe`` and
    report, per pair, the differing element codes, values and scales, the first
    ``first`` differing elements in hex and the rule each difference comes from.

    A callable in ``profiles`` is a user's implementation (float32 array -> dequantized
    float32 of the same shape, named by its ``__name__``): its pairs compare values, and
    each difference names the profile and rule whose value the user's side gave
    (REC-CMP-002).

    Raises:
        ValueError: unknown recipe or profile, fewer than two sides, or a user side that
            returns another shape.
    """
    # why long: the two kinds of side (profile, user implementation) and their pairs
    first = check_count("first", first, lo=0)
    rec = get_recipe(recipe)
    results: dict[str, Quantized] = {}
    users: dict[str, npt.NDArray[np.float32]] = {}
    skipped: dict[str, str] = {}
    for name in profiles:
        if callable(name):
            label, values = _user_side(name, x, set(results) | set(users))
            users[label] = values
            continue
        p = get_profile(name)
        if rec.name not in p.recipes:
            skipped[p.name] = f"{p.name} has no {rec.name}"
            continue
        results[p.name] = quantize(x, rec, profile=p, **kwargs)
    if len(results) + len(users) < 2:
        have = [p.name for p in PROFILES.values() if rec.name in p.recipes]
        raise ValueError(f"compare needs two sides implementing {rec.name!r}; got "
                         f"{', '.join([*results, *users]) or 'none'} (profiles that do: "
                         f"{', '.join(have)}; or pass your implementation as a callable)")
    pairs = [_pair(x, results[a], results[b], first) for a, b in combinations(results, 2)]
    sides = {**{n: q.values for n, q in results.items()}, **users}
    pairs += [_value_pair(x, rec.name, (u, users[u]), (o, sides[o]), first)
              for u in users for o in sides if o != u and (o not in users or o > u)]
    return Comparison(recipe=rec.name, results=results, pairs=pairs, skipped=skipped,
                      user_values=users)
