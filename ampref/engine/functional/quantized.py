"""A linear layer whose three GEMMs run under a block-scaled or FP8 training recipe
(specs/train.md TRN-QNT-*).

Operands are quantized by :func:`ampref.recipes.quantize` with the roles of a
:class:`~ampref.recipes.roles.GemmRecipe` and multiplied by :func:`ampref.recipes.matmul`
(FP32 result); the bias is added in float32 and the output rounded to the layer's
format. Gradients are straight-through: dgrad and wgrad multiply the quantized gradient
by the quantized weight/activation, and nothing flows through the scales (TE's
semantics). The weight is quantized from the float32 master values, activations and
gradients from the values the engine holds (bf16 under bf16 autocast).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ampref import recipes
from ampref.formats.cast import value_table
from ampref.formats.table import get_format
from ampref.recipes.roles import GemmRecipe, Operand, get_gemm_recipe
from ..tensor import Tensor, round_to
from .core import backend_of, check_tensor, make

__all__ = ["QuantState", "quantized_linear", "operand_stats"]


@dataclass(kw_only=True)
class QuantState:
    """Per-layer state of a recipe (TRN-QNT-002): the delayed-scaling state of each
    tensor (x, w, g) and, when ``collect`` is on, the statistics of the last quantization
    of each role (filled by :func:`quantized_linear`)."""

    delayed: dict[str, Any] = field(default_factory=dict)
    collect: bool = False
    stats: dict[str, dict[str, float]] = field(default_factory=dict)
    #: keep the unquantized x, w and g of the next call (for what-if statistics)
    keep: bool = False
    operands: dict[str, np.ndarray] = field(default_factory=dict)


def operand_stats(x: np.ndarray, q: recipes.Quantized) -> dict[str, float]:
    """amax, underflow % (nonzero inputs that quantize to zero), saturation % (inputs whose
    scaled value lay beyond max + half the format's top gap, so the max code clipped
    them), relative MSE sum((q - x)^2) / sum(x^2) against the unquantized tensor, the
    smallest nonzero and the largest decoded block scale (without NVFP4's per-tensor
    scale; 0 when every scale is 0) (TRN-QNT-004)."""
    v = q.values.astype(np.float64)
    x64 = np.asarray(x, np.float64)
    n = max(x64.size, 1)
    under = np.count_nonzero((x64 != 0) & (v == 0)) / n
    table = value_table(q.element).astype(np.float64)
    e = np.abs(table[q.codes])
    top = get_format(q.element).max
    below = np.max(table[np.isfinite(table) & (table < top)])
    # saturated: the scaled value lay beyond the rounding boundary above the max,
    # max + (max - next lower)/2, so it was clipped rather than rounded
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.abs(x64) / np.where(e > 0, np.abs(v) / e, np.inf)
    sat = np.count_nonzero((e == top) & (ratio > top + (top - below) / 2)) / n
    den = float(np.sum(x64 * x64))
    mse = float(np.sum((v - x64) ** 2)) / den if den > 0 else 0.0
    s = np.asarray(q.scales, np.float64)
    pos = s[s > 0]
    return {"amax": float(np.max(np.abs(x64), initial=0.0)), "underflow_pct": 100 * under,
            "saturation_pct": 100 * sat, "rel_mse": mse,
            "scale_min": float(pos.min()) if pos.size else 0.0, "scale_max": float(np.max(s))}


def _quant(a: np.ndarray, op: Operand, role: str, rec: GemmRecipe, profile: str,
           state: QuantState | None, seed: int, slot: int) -> recipes.Quantized:
    opts = op.options()
    if op.recipe == "fp8_delayed":
        st = None if state is None else state.delayed.get(role)
        q = recipes.quantize(a, op.recipe, profile=profile, state=st, **opts)
        if state is not None:
            state.delayed[role] = q.state
        return q
    if op.stochastic:
        # one independent stream per (layer call, operand slot): the caller's seed
        # already separates steps and layers (TRN-QNT-003)
        return recipes.quantize(a, op.recipe, profile=profile, tile=op.tile,
                                rounding="stochastic", seed=(seed * 8 + slot) % 2**64, **opts)
    return recipes.quantize(a, op.recipe, profile=profile, tile=op.tile, **opts)


def _pad_k(a: np.ndarray, ops: tuple[Operand, Operand]) -> np.ndarray:
    """wgrad operands under the Hadamard transform: the token axis (K) zero-padded to a
    multiple of 16, the same for both operands, which leaves the product unchanged (TE
    refuses such token counts; TRN-QNT-003)."""
    a = np.ascontiguousarray(a)
    k = a.shape[1]
    if any(op.hadamard for op in ops) and k % 16:
        a = np.pad(a, ((0, 0), (0, 16 - k % 16)))
    return a


def _t(q: recipes.Quantized) -> recipes.Quantized:
    """The transpose of a per-tensor quantized matrix (same scale, codes transposed)."""
    return replace(q, codes=np.ascontiguousarray(q.codes.T))


def quantized_linear(input: Tensor, weight: Tensor, bias: Tensor | None = None, *,
                     recipe: str | GemmRecipe, profile: str = "te",
                     accumulation: str = "exact", seed: int = 0,
                     state: QuantState | None = None) -> Tensor:
    """y = x W^T + b with fprop, dgrad and wgrad under ``recipe`` (TRN-QNT-001..003).

    Raises:
        TypeError: not Tensors, or a backend other than NumPy.
        ValueError: shapes that do not match, unknown recipe or profile.
    """
    # why long: the three GEMMs of a recipe linear (forward, input gradient, weight gradient)
    # with their roles' quantizers, kept together so the roles can be compared with TE's
    rec = get_gemm_recipe(recipe)
    x, w = check_tensor(input, "quantized_linear"), check_tensor(weight, "quantized_linear")
    be = backend_of(x, w, bias)
    if be.name != "numpy":
        raise TypeError(f"quantized_linear runs on the NumPy backend, got {be.name!r}")
    if w.ndim != 2 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"quantized_linear: input {x.shape} does not match weight {w.shape}")
    fmt = x.format
    X = np.asarray(x.data, np.float32).reshape(-1, x.shape[-1])
    W = np.asarray(w.data, np.float32)
    qx = _quant(X, rec.fprop[0], "x", rec, profile, state, seed, 0)
    qw = _quant(W, rec.fprop[1], "w", rec, profile, state, seed, 1)
    if state is not None and state.collect:
        state.stats = {"x": operand_stats(X, qx), "w": operand_stats(W, qw)}
    if state is not None and state.keep:
        state.operands = {"x": X.copy(), "w": W.copy()}
    y = recipes.matmul(qx, qw, accumulation=accumulation)
    if bias is not None:
        with np.errstate(all="ignore"):
            y = (y + np.asarray(bias.data, np.float32)).astype(np.float32)
    out = round_to(be, y, fmt).reshape(x.shape[:-1] + (W.shape[0],))

    def bwd(g: Any) -> tuple[Any, ...]:
        G = np.asarray(g, np.float32).reshape(-1, W.shape[0])
        qg = _quant(G, rec.dgrad[0], "g", rec, profile, state, seed, 2)
        if state is not None and state.collect:
            state.stats["g"] = operand_stats(G, qg)
        if state is not None and state.keep:
            state.operands["g"] = G.copy()
        if rec.per_tensor:
            qwt, qgt, qxt = _t(qw), _t(qg), _t(qx)
        else:
            qwt = _quant(np.ascontiguousarray(W.T), rec.dgrad[1], "w", rec, profile, None,
                         seed, 3)
            GT, XT = _pad_k(G.T, rec.wgrad), _pad_k(X.T, rec.wgrad)
            qgt = _quant(GT, rec.wgrad[0], "g", rec, profile, None, seed, 4)
            qxt = _quant(XT, rec.wgrad[1], "x", rec, profile, None, seed, 5)
        gx = recipes.matmul(qg, qwt, accumulation=accumulation).reshape(x.shape)
        gw = recipes.matmul(qgt, qxt, accumulation=accumulation)
        if bias is None:
            return gx, gw
        return gx, gw, be.sum(G, axis=0)
    ins = [t for t in (x, w, bias) if t is not None]
    return make(be, out, fmt, "quantized_linear", ins, bwd)
