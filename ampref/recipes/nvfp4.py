"""NVFP4: E2M1 elements, an E4M3 decode scale per block of 16 (1x16 or 16x16) and an FP32
per-tensor scale, as Transformer Engine's kernels, TE's Python reference and torchao
compute them (specs/recipes.md REC-NV4-*).

All arithmetic is float32 with one rounding per operation, in the order of the sources;
``fminf`` (TE kernels) returns the non-NaN operand, ``torch.min`` propagates NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import decode, encode
from .catalog import Profile
from .tiles import FLT_MAX, f32

__all__ = ["global_scales", "block_scales", "four_over_six_pick"]

_F32 = np.float32
E4M3 = "float8_e4m3fn"


def _e4m3(v: Any) -> Any:
    """Saturating nearest-even E4M3 codes (cvt.rn.satfinite; torch's clamp-then-cast)."""
    return encode(f32(v), E4M3, saturate=True).astype(np.uint8)


def global_scales(amax: Any, profile: Profile, e4m3_max: float = 448.0) -> tuple[Any, Any]:
    """(S_enc, S_dec) from the tensor (or row) amax (REC-NV4-001).

    te: S_enc = fminf(fl32(e4m3_max * 6 / amax), FLT_MAX), 1 when amax = 0 or S_enc = 0
    (inf amax); NaN amax gives FLT_MAX (fminf). te-reference: the same without the
    amax = 0 rule (0 gives FLT_MAX) and NaN propagating. torchao: S_dec = fl32(amax / 2688)
    (``per_tensor_amax_to_scale``), S_enc = fl32(1 / S_dec). S_dec = fl32(1 / S_enc)
    otherwise.
    """
    a = f32(amax)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if profile.nvfp4 == "torchao":
            dec = (a / _F32(448.0 * 6.0)).astype(_F32)
            return (_F32(1) / dec).astype(_F32), dec
        enc = (_F32(e4m3_max * 6.0) / a).astype(_F32)
        if profile.nvfp4 == "te":
            enc = np.fmin(enc, FLT_MAX)
            enc = np.where((a == 0) | (enc == 0), _F32(1), enc)
        else:
            enc = np.where(np.isnan(enc), enc, np.minimum(enc, FLT_MAX))
            enc = np.where(enc == 0, _F32(1), enc)
        enc = enc.astype(_F32)
        return enc, (_F32(1) / enc).astype(_F32)


def block_scales(bamax: Any, s_enc: Any, s_dec: Any, profile: Profile,
                 per_tensor: bool = True) -> tuple[Any, Any]:
    """(E4M3 scale codes, float32 element multipliers) per block (REC-NV4-002/003).

    te / te-reference: S_dec_b = e4m3(fminf(amax_b * fl32(S_enc * fl32(1/6)), FLT_MAX)),
    multiplier = fminf(fl32(1 / fl32(S_dec_b * S_dec)), FLT_MAX) (te-reference: torch.min,
    NaN propagates). torchao: S_dec_b = e4m3(clamp(fl32(fl32(amax_b / 6) / S_dec),
    2^-6, 448)), multiplier = fl32(fl32(1 / S_dec) / S_dec_b); without a per-tensor scale
    S_dec_b = e4m3(clamp(fl32(amax_b / 6), 2^-6, 448)), multiplier = fl32(1 / S_dec_b).
    """
    b = f32(bamax)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if profile.nvfp4 == "torchao":
            bs = (b / _F32(6)).astype(_F32)
            if per_tensor:
                bs = (bs / s_dec).astype(_F32)
            bs = np.clip(bs, _F32(2.0**-6), _F32(448))  # NaN passes through clip
            codes = _e4m3(bs)
            sb = decode(codes, E4M3)
            num = (_F32(1) / s_dec).astype(_F32) if per_tensor else _F32(1)
            return codes, (num / sb).astype(_F32)
        m = (s_enc * (_F32(1) / _F32(6))).astype(_F32)
        raw = (b * m).astype(_F32)
        keep_nan = profile.nvfp4 == "te-reference"
        raw = np.where(keep_nan & np.isnan(raw), raw, np.fmin(raw, FLT_MAX))
        codes = _e4m3(raw)
        return codes, _multiplier(decode(codes, E4M3), s_dec, keep_nan)


def _multiplier(sb: Any, s_dec: Any, keep_nan: bool) -> Any:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (_F32(1) / (sb * s_dec).astype(_F32)).astype(_F32)
    out = np.fmin(inv, FLT_MAX)
    return np.where(keep_nan & np.isnan(inv), inv, out).astype(_F32)


def four_over_six_pick(x: npt.NDArray[np.float32], bamax: Any, gamax: Any, s_enc: Any,
                       s_dec: Any, tile_rows: int, err: str, e4m3_max: float,
                       encode_fp4: Any) -> tuple[Any, Any, Any]:
    """"4over6" (TE reference ``_quantize_blockwise_4over6_reference``; REC-NV4-004).

    ``x``: blocks (rows, nblocks, 16); ``bamax`` (rows, nblocks); ``gamax`` the global
    amax, one per row when row-scaled. Candidates map-to-6 (scale base = fl32(fl32(amax_b
    / 6) * S_enc)) and map-to-4 (base * 1.5), each an E4M3 code; each element's error is
    |v - x| (MAE) or (v - x)^2 (MSE) with v = fl32(fl32(fl32(e * S_dec_b) * gamax) /
    fl32(6 * e4m3_max)), summed over the 16 elements in order in float32; 16x16 tiles add
    the 16 row errors in the CUDA warp tree order. Map-to-4 wins only when strictly
    smaller. Returns (element codes, scale codes, multipliers) per block.
    """
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = ((f32(bamax) / _F32(6)).astype(_F32) * s_enc).astype(_F32)
        cands = []
        for factor in (1.5, 1.0):
            codes = _e4m3((base * _F32(factor)).astype(_F32))
            mult = _multiplier(decode(codes, E4M3), s_dec, True)
            q = encode_fp4((x * mult[..., None]).astype(_F32))
            e = decode(q, "float4_e2m1fn")
            ga = f32(gamax).reshape(-1, *([1] * (x.ndim - 1))) if np.ndim(gamax) else f32(gamax)
            v = ((e * decode(codes, E4M3)[..., None]).astype(_F32) * ga).astype(_F32)
            v = (v / _F32(6.0 * e4m3_max)).astype(_F32)
            d = (v - x).astype(_F32)
            per = np.abs(d) if err == "mae" else (d * d).astype(_F32)
            total = np.zeros(x.shape[:-1], _F32)
            for i in range(x.shape[-1]):  # sequential float32 sum, element order
                total = (total + per[..., i]).astype(_F32)
            cands.append((q, codes, mult, _tree(total, tile_rows)))
    pick4 = cands[0][3] < cands[1][3]
    return tuple(np.where(pick4[..., None] if k == 0 else pick4, c4, c6)
                 for k, (c4, c6) in enumerate(zip(cands[0][:3], cands[1][:3], strict=True)))


def _tree(err: Any, rows: int) -> Any:
    """16x16 tiles: per-row errors summed 8+8, 4+4, 2+2, 1+1 (CUDA warp reduction)."""
    if rows == 1:
        return err
    r = err.reshape(-1, rows, err.shape[-1])
    while r.shape[1] > 1:
        h = r.shape[1] // 2
        r = (r[:, :h] + r[:, h:]).astype(_F32)
    return np.repeat(r[:, 0], rows, axis=0)
