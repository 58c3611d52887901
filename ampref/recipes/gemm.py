"""Block-scaled GEMM references: TE's blockwise FP8 equation and decode-then-accumulate for
MX and NVFP4 (specs/recipes.md REC-GEM-*).

Both operands are quantized along K, their last axis, and the product is A @ B^T
(``torch.nn.functional.linear``'s and TE's convention): ``qa`` is (M, K), ``qb`` (N, K).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.accumulation.models import matmul as _model_matmul
from ampref.accumulation.blockmma import BLOCK_SCALED, block_scaled_dot
from ampref.accumulation.certified import matmul_f32
from ampref.formats.cast import decode
from ampref.formats.exactsum import add_rounded
from ampref.formats.table import get_format
from .catalog import get_recipe
from .tiles import Quantized, dequantize

__all__ = ["matmul"]

_F32 = get_format("float32")


def _fma32(a: Any, b: Any, c: Any) -> Any:
    """fl32(a * b + c), one rounding (a*b is exact in float64 for float32 a, b)."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    return add_rounded(p, np.asarray(c, np.float64), _F32, "nearest_even").astype(np.float32)


def acc_matmul(a: Any, b: Any, *, input_format: str, accumulation: str,
               b_format: str | None = None) -> Any:
    """a @ b under an accumulation model; "exact" (fl32 of the exact sum) runs through
    ampref.accumulation.certified at BLAS speed, the same numbers as accumulation.matmul's exact.
    ``b_format``: B's element format when it differs (E4M3 x E5M2, HYBRID's dgrad and
    wgrad; the tensor-core models take that mix, ACC-TC-007)."""
    if accumulation == "exact":
        return matmul_f32(np.asarray(a, np.float32), np.asarray(b, np.float32))
    return _model_matmul(a, b, input_format=input_format, accumulation=accumulation,
                         b_format=b_format)


def _check(qa: Any, qb: Any) -> None:
    for name, q in (("qa", qa), ("qb", qb)):
        if not isinstance(q, Quantized):
            raise TypeError(f"{name} must be a Quantized (from ampref.recipes.quantize), got "
                            f"{type(q).__name__}")
        if q.codes.ndim != 2:
            raise ValueError(f"{name} must be a quantized 2-D matrix, got shape {q.codes.shape}")
    if qa.recipe != qb.recipe:
        raise ValueError(f"operands of different recipes: {qa.recipe!r} and {qb.recipe!r}")
    if qa.codes.shape[1] != qb.codes.shape[1]:
        raise ValueError(f"K differs: qa is {qa.codes.shape}, qb is {qb.codes.shape} "
                         f"(the product is qa @ qb.T)")


def _fp8_block(qa: Quantized, qb: Quantized, accumulation: str) -> npt.NDArray[np.float32]:
    """Per 128-wide K chunk an FP32 partial under ``accumulation``, then
    y = fma(partial * s_a, s_b, y), or fma(partial * s_b, s_a, y) when A has 2-D tiles
    (TE blockwise_fp8_gemm_reference.py; REC-GEM-001)."""
    if qa.tile[0] > 1 and qb.tile[0] > 1:
        raise ValueError("2-D x 2-D tiled FP8 block GEMMs are not supported (TE refuses them)")
    ea, eb = decode(qa.codes, qa.element), decode(qb.codes, qb.element)
    M, K = ea.shape
    N = eb.shape[0]
    y = np.zeros((M, N), np.float32)
    ra, rb = qa.tile[0], qb.tile[0]
    for c, k0 in enumerate(range(0, K, 128)):
        part = acc_matmul(ea[:, k0:k0 + 128], eb[:, k0:k0 + 128].T, input_format=qa.element,
                          accumulation=accumulation, b_format=qb.element)
        sa = qa.scales[np.arange(M) // ra, c][:, None]
        sb = qb.scales[np.arange(N) // rb, c][None, :]
        with np.errstate(over="ignore", invalid="ignore"):
            if ra > 1:
                y = _fma32((part * sb).astype(np.float32), sa, y)
            else:
                y = _fma32((part * sa).astype(np.float32), sb, y)
    return y


def matmul(qa: Quantized, qb: Quantized, *, accumulation: str = "exact") -> npt.NDArray[np.float32]:
    """qa @ qb^T from two quantized operands of one recipe (float32 result).

    fp8_block: TE's chunked equation (REC-GEM-001). MX and NVFP4: decode each element
    times its block scale (exact), accumulate over K under ``accumulation`` (any model of
    :mod:`ampref.accumulation.models`; "exact" rounds the exact dot product once), then for NVFP4
    multiply by alpha = fl32(g_a * g_b) (REC-GEM-002). fp8_current/fp8_delayed: the
    accumulated FP8 products times fl32(s_a * s_b) (cuBLAS's scale_a * scale_b).

    Raises:
        TypeError/ValueError: not Quantized, not 2-D, different recipes or K, unknown model.
    """
    _check(qa, qb)
    if not isinstance(accumulation, str):
        raise TypeError(f"accumulation must be a model name such as 'exact' or "
                        f"'tensorcore:h100', got {type(accumulation).__name__}: "
                        f"{accumulation!r}")
    if qa.recipe == "fp8_block":
        return _fp8_block(qa, qb, accumulation)
    if qa.tile == (0, 0):
        part = acc_matmul(decode(qa.codes, qa.element), decode(qb.codes, qb.element).T,
                          input_format=qa.element, accumulation=accumulation,
                          b_format=qb.element)
        with np.errstate(over="ignore", invalid="ignore"):
            return (part * (qa.scales * qb.scales).astype(np.float32)).astype(np.float32)
    gpu = accumulation.split(":", 1)[1].lower() if accumulation.startswith("tensorcore:") else ""
    if gpu in BLOCK_SCALED:
        return _block_scaled(qa, qb, gpu)
    da = _decoded(qa)
    db = _decoded(qb)
    # decoded NVFP4/MX values have at most 6 significant bits: bf16 holds them, and the
    # tensor-core models take bf16 (a value outside bf16's range is refused, named)
    fin = "bfloat16" if accumulation.startswith("tensorcore:") else "float32"
    y = acc_matmul(da, db.T, input_format=fin, accumulation=accumulation)
    return _times_alpha(y, qa, qb)


def _times_alpha(y: npt.NDArray[np.float32], qa: Quantized,
                 qb: Quantized) -> npt.NDArray[np.float32]:
    """y_ij * alpha_ij with alpha_ij = fl32(g_a[i] g_b[j]) (REC-GEM-002): a row-scaled
    operand's global scales run along its own rows (A: output rows, B: output columns), a
    per-tensor one is a scalar, and an operand without a global scale contributes 1."""
    if qa.global_scale is None and qb.global_scale is None:
        return y
    ga, gb = (np.float32(1.0) if q.global_scale is None else
              np.asarray(q.global_scale, np.float32) for q in (qa, qb))
    ga = ga.reshape(-1, 1) if np.ndim(ga) else ga
    gb = gb.reshape(1, -1) if np.ndim(gb) else gb
    with np.errstate(over="ignore", invalid="ignore"):
        alpha = np.asarray(ga * gb, np.float32)  # one float32 rounding of the product
        return (y * alpha).astype(np.float32)


def _row_scales(q: Quantized) -> npt.NDArray[np.float64]:
    """Decoded block scales per row of the operand (2-D tiles repeat over their rows)."""
    s = np.asarray(q.scales, np.float64)
    return np.repeat(s, q.tile[0], axis=0)[:q.codes.shape[0]] if q.tile[0] > 1 else s


def _block_scaled(qa: Quantized, qb: Quantized, gpu: str) -> npt.NDArray[np.float32]:
    """MX/NVFP4 on a GPU with block-scaled MMAs: the instruction model of
    :mod:`ampref.accumulation.blockmma` on the element values and block scales (REC-GEM-003), then
    alpha = fl32(g_a * g_b) for NVFP4."""
    fp8 = qa.element.startswith("float8") or qb.element.startswith("float8")
    kind = "mxf8f6f4" if fp8 or qa.recipe.startswith("mxfp6") else "mxf4nvf4"
    ea, eb = (decode(q.codes, q.element).astype(np.float64) for q in (qa, qb))
    sa, sb = _row_scales(qa), _row_scales(qb)
    K = ea.shape[1]
    pad = (-K) % (32 if kind == "mxf8f6f4" else 64)  # zero elements fill the last MMA
    if pad:
        ea, eb = (np.pad(e, ((0, 0), (0, pad))) for e in (ea, eb))
        per = qa.tile[1]
        sa, sb = (np.pad(s, ((0, 0), (0, (K + pad) // per - s.shape[1])), constant_values=1.0)
                  for s in (sa, sb))
    M, N = ea.shape[0], eb.shape[0]
    rows = max(1, 2**22 // max(1, N * ea.shape[1]))  # bound the (rows, N, K) temporaries
    y = np.empty((M, N), np.float32)
    for i in range(0, M, rows):
        y[i:i + rows] = block_scaled_dot(
            ea[i:i + rows, None, :], eb[None, :, :], None, sa[i:i + rows, None, :],
            sb[None, :, :], gpu=gpu, kind=kind, a_format=qa.element, b_format=qb.element,
            scale_format=get_recipe(qa.recipe).scale_format)
    return _times_alpha(y, qa, qb)


def _decoded(q: Quantized) -> npt.NDArray[np.float32]:
    """element x block scale, without the per-tensor scale (exact for the recipes here)."""
    return dequantize(q.codes, q.element, q.scales, q.tile, q.codes.shape, None)
