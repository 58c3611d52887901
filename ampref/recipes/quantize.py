"""``quantize(x, recipe, profile=...)``: one entry point for every recipe and profile
(specs/recipes.md REC-API-*)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import decode
from ampref.common.checks import check_flag
from ampref.kernels.srhash import check_seed
from .catalog import PROFILES, RECIPES, Profile, Recipe, get_profile, get_recipe
from .elements import encode_elements, sr_words, stochastic_e2m1
from .hadamard import rht
from .mx import mx_blocks
from .nvfp4 import block_scales, four_over_six_pick, global_scales
from .pertensor import FLT_MAX, DelayedScaling, scales_from_amax
from .tiles import Quantized, as_float32, block_amax, f32, from_blocks, to_blocks

__all__ = ["quantize"]

_ROUNDINGS = ("nearest_even", "stochastic")
_SOURCE_MAX = {"float32": FLT_MAX, "float64": FLT_MAX, "float16": 65504.0,
               "bfloat16": float(np.float32(3.3895313892515355e38))}


def _check(recipe: Recipe, profile: Profile, tile: Any, rounding: Any,
           options: dict[str, Any], ndim: int) -> tuple[int, int]:
    if recipe.name not in profile.recipes:
        have = [p.name for p in PROFILES.values() if recipe.name in p.recipes]
        raise ValueError(f"profile {profile.name!r} does not implement recipe {recipe.name!r}; "
                         f"profiles that do: {', '.join(have)}")
    bad = sorted(set(options) - set(recipe.options))
    if bad:
        raise ValueError(f"unknown option {bad[0]!r} for recipe {recipe.name!r}; its options: "
                         f"{', '.join(recipe.options) or 'none'}")
    if rounding not in _ROUNDINGS:
        raise ValueError(f"unknown rounding {rounding!r}; choose one of {', '.join(_ROUNDINGS)}")
    if rounding == "stochastic" and recipe.family != "nvfp4":
        raise ValueError(f"stochastic rounding is specified for NVFP4 (TE rounds its gradients "
                         f"so); recipe {recipe.name!r} rounds to nearest-even")
    t = recipe.default_tile if tile is None else tile
    if isinstance(t, list):
        t = tuple(t)
    if t not in recipe.tiles:
        raise ValueError(f"tile {tile!r} is not one of recipe {recipe.name!r}'s tiles "
                         f"{', '.join(map(str, recipe.tiles))}")
    if t[0] > 1 and ndim != 2:
        raise ValueError(f"2-D tiles {t} need a 2-D (weight) matrix, got {ndim} axes")
    return t


def _nonneg(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(v).__name__}: {v!r}")
    if not (np.isfinite(v) and v >= 0):
        raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
    return float(v)


def quantize(x: npt.ArrayLike, recipe: str | Recipe, *, profile: str | Profile = "te",
             tile: tuple[int, int] | None = None, rounding: str = "nearest_even",
             seed: int | None = None, random_bits: Any = None, **options: Any) -> Quantized:
    """Quantize ``x`` under ``recipe`` with ``profile``'s arithmetic (REC-API-001).

    ``x`` is read as float32 (float64 rounds to nearest-even first) and as a matrix
    (leading axes x last axis); tiles run along the last axis (1 x c) or over a 2-D
    matrix (r x c). See :data:`ampref.recipes.RECIPES` for each recipe's tiles and
    options and ``specs/recipes.md`` for the exact arithmetic of every profile,
    including NaN, inf, zero and subnormal amax.

    Raises:
        TypeError: ``x`` not floating point, options of the wrong type.
        ValueError: unknown recipe, profile, tile, rounding or option (the choices named);
            stochastic rounding without ``seed``/``random_bits``.
    """
    # why long: argument validation for every recipe option (one named error each) before the
    # dispatch to the recipe
    rec, prof = get_recipe(recipe), get_profile(profile)
    if seed is not None:
        check_seed(seed)  # a bad seed is refused whatever the rounding
    x32 = as_float32(x, f"recipe {rec.name!r}")
    if random_bits is not None:  # bad words too, whatever the recipe and rounding
        sr_words(x32.size, seed, random_bits)
    t = _check(rec, prof, tile, rounding, options, x32.ndim)
    src_max = _SOURCE_MAX.get(np.asarray(x).dtype.name, FLT_MAX)
    kw: dict[str, Any] = dict(recipe=rec.name, profile=prof.name, element=rec.element, tile=t,
              options=dict(options))
    if rec.family == "nvfp4":
        return _nvfp4(x32, rec, prof, t, rounding, seed, random_bits, options, kw)
    if rec.family == "mx":
        rule = options.get("scale_rule", prof.mx_rules[0])
        if rule not in prof.mx_rules:
            raise ValueError(f"unknown scale_rule {rule!r} for profile {prof.name!r}; choose "
                             f"one of {', '.join(prof.mx_rules)}")
        x2 = x32.reshape(-1, x32.shape[-1])
        blocks = to_blocks(x2, t)
        codes, scodes = mx_blocks(blocks, block_amax(blocks, prof.amax), rec.element, prof,
                                  rule)
        return _finish(x32, from_blocks(codes, x2.shape, t), scodes, None, **kw)
    fmt = options.get("fp8_format", "e4m3")
    element = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}.get(fmt)
    if element is None:
        raise ValueError(f"unknown fp8_format {fmt!r}; choose e4m3 or e5m2")
    kw["element"] = element
    if rec.family == "delayed":
        return _delayed(x32, prof, fmt, options, kw)
    eps = _nonneg("epsilon", options.get("epsilon", prof.epsilon))
    pow2 = check_flag("pow2", options.get("pow2", prof.block_pow2 and rec.family == "fp8_block"))
    x2 = x32.reshape(-1, x32.shape[-1])
    if rec.family == "per_tensor":
        blocks, inf_value = x2.reshape(1, 1, -1), FLT_MAX if prof.scale == "te" else src_max
    else:
        blocks, inf_value = to_blocks(x2, t), src_max
    s, inv = scales_from_amax(block_amax(blocks, prof.amax), fmt, prof.scale, epsilon=eps,
                              pow2=pow2, inf_value=inf_value)
    with np.errstate(invalid="ignore", over="ignore"):
        xs = (blocks * s[..., None]).astype(np.float32)
    codes = encode_elements(xs, element, prof)
    if rec.family == "per_tensor":
        return _finish(x32, codes.reshape(x2.shape), inv.reshape(()), None, float_scales=True,
                       **kw)
    return _finish(x32, from_blocks(codes, x2.shape, t), inv, None, float_scales=True, **kw)


def _delayed(x32: Any, prof: Profile, fmt: str, options: dict[str, Any],
             kw: dict[str, Any]) -> Quantized:
    cfg = DelayedScaling(fp8_format=fmt, margin=options.get("margin", 0),
                         amax_history_len=options.get("amax_history_len", 1024),
                         amax_compute_algo=options.get("amax_compute_algo", "max"))
    st = options.get("state") or cfg.init()
    nxt = cfg.update(cfg.record(st, x32))
    s = np.float32(st.scale)
    with np.errstate(invalid="ignore", over="ignore"):
        xs = (x32 * s).astype(np.float32)
    codes = encode_elements(xs, kw["element"], prof)
    with np.errstate(divide="ignore"):
        inv = np.asarray(np.float32(1) / s, np.float32)
    return replace(_finish(x32, codes, inv, None, float_scales=True, **kw), state=nxt)


def _nvfp4(x32: Any, rec: Recipe, prof: Profile, t: tuple[int, int], rounding: str,
           seed: Any, rbits: Any, options: dict[str, Any], kw: dict[str, Any]) -> Quantized:
    # why long: the NVFP4 recipe's steps (global scale, block amax, scale encode, element
    # encode, decode) follow TE's reference in one place so they can be checked line by line
    had = check_flag("hadamard", options.get("hadamard", False))
    row_scaled = check_flag("row_scaled", options.get("row_scaled", False))
    fos = check_flag("four_over_six", options.get("four_over_six", False))
    per_tensor = check_flag("per_tensor_scale", options.get("per_tensor_scale", True))
    e4m3_max = _nonneg("four_over_six_e4m3_max", options.get("four_over_six_e4m3_max", 448))
    err = str(options.get("four_over_six_error", "mae")).lower()
    if err not in ("mae", "mse") or e4m3_max not in (448.0, 256.0):
        raise ValueError(f"four_over_six_error must be 'mae' or 'mse' and "
                         f"four_over_six_e4m3_max 448 or 256, got {err!r}, {e4m3_max!r}")
    if prof.nvfp4 == "torchao" and (fos or row_scaled):
        raise ValueError("4over6 and row-scaled NVFP4 are Transformer Engine features; use "
                         "profile 'te' or 'te-reference'")
    if not per_tensor and prof.nvfp4 != "torchao":
        raise ValueError("NVFP4 without a per-tensor scale is torchao's single-level mode; "
                         "use profile 'torchao'")
    if row_scaled and t != (1, 16):
        raise ValueError("row-scaled NVFP4 uses 1x16 tiles only")
    x2 = x32.reshape(-1, x32.shape[-1])
    if had:
        x2 = rht(x2, options.get("hadamard_accumulation", "sequential"))
    M, N = x2.shape
    r = t[0]
    Mp, Np = -(-M // r) * r, -(-N // 16) * 16
    xp = np.pad(x2, ((0, Mp - M), (0, Np - N)))
    xr = xp.reshape(Mp, Np // 16, 16)
    if r == 16:  # the tile's amax for each of its 16 rows, as TE's reference lays it out
        bamax = np.repeat(block_amax(to_blocks(xp, t), prof.amax), 16, axis=0)
    else:
        bamax = block_amax(xr, prof.amax)
    gamax = block_amax(xp[:, None, :], prof.amax)[:, 0] if row_scaled else \
        block_amax(xp.reshape(1, -1), prof.amax)[0]
    s_enc, s_dec = global_scales(gamax, prof, e4m3_max if fos else 448.0)
    se, sd = (s_enc[:, None], s_dec[:, None]) if row_scaled else (s_enc, s_dec)
    if fos:
        enc = lambda v: encode_elements(v, rec.element, prof)  # noqa: E731
        codes, scodes, _ = four_over_six_pick(xr, bamax, gamax, se, sd, r, err, e4m3_max, enc)
        codes = codes.reshape(Mp, Np)[:M, :N]
    else:
        scodes, mult = block_scales(bamax, se, sd, prof, per_tensor)
        with np.errstate(invalid="ignore", over="ignore"):
            xs = (xr * mult[..., None]).astype(np.float32).reshape(Mp, Np)[:M, :N]
        if rounding == "stochastic":
            codes = stochastic_e2m1(xs, sr_words(xs.size, seed, rbits))
        else:
            codes = encode_elements(xs, rec.element, prof)
    scodes = scodes[:M] if r == 1 else scodes[::16]
    g = (s_dec[:M] if row_scaled else s_dec) if per_tensor else None
    q = _finish(x32, codes, scodes, g, **kw)
    return replace(q, amax=f32(gamax[:M] if row_scaled else gamax))


def _finish(x32: Any, codes2: Any, scodes: Any, g: Any, *, recipe: str, profile: str,
            element: str, tile: tuple[int, int], options: dict[str, Any],
            float_scales: bool = False) -> Quantized:
    rec = RECIPES[recipe]
    codes = np.asarray(codes2, np.uint8).reshape(x32.shape)
    if tile[0] == 1:
        scodes = scodes.reshape(*x32.shape[:-1], scodes.shape[-1])
    if float_scales:
        scales = np.asarray(scodes, np.float32)
        scale_codes = scales.view(np.uint32)
    else:
        scale_codes = np.asarray(scodes, np.uint8)
        scales = decode(scale_codes, rec.scale_format).astype(np.float32)
    return Quantized(recipe=recipe, profile=profile, element=element, tile=tile, codes=codes,
                     scales=scales, scale_codes=scale_codes,
                     global_scale=None if g is None else f32(g), options=options)
