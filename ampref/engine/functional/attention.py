"""Scaled dot-product attention as composed engine ops (matmul, masked_fill, softmax)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ampref.common.checks import check_flag, check_real
from ..indices import IndexTensor
from ..tensor import Tensor
from .core import autocast_inputs, check_tensor, nested_ops, to_format
from .elementwise import add, masked_fill, mul
from .linalg import matmul
from .norms import softmax
from .shapes import broadcast_to, reshape, transpose

__all__ = ["scaled_dot_product_attention"]


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False, *,
                                 accumulation: str = "exact") -> Tensor:
    """softmax(q k^T * scale + mask) v over (..., L, E) inputs, as composed engine ops:

    s = fl(fl(q @ k^T) * fl32(scale)); positions where a boolean ``attn_mask`` is False
    (or above the diagonal with ``is_causal``) get -inf; a floating ``attn_mask`` (a
    Tensor, torch's additive mask: 0 / -inf from a boolean one, or a bias such as ALiBi)
    is added, s = fl(s + mask) in the compute format (broadcast; no gradient flows to
    it, as torch's fused CPU kernel returns none); p = softmax(s) (float32 inside, output
    in the compute format); out = p @ v. ``scale`` defaults to 1/sqrt(E). A row with
    every position masked gives NaN. Autocast name ``scaled_dot_product_attention``
    (lower precision; nested ops are not re-cast).

    ``enable_gqa`` (grouped-query attention, torch's keyword): key and value may have
    fewer heads (axis -3) than the query, a divisor of its heads; each key/value head
    serves that many consecutive query heads (torch's ``repeat_interleave``), and its
    gradient is the exact sum of its copies' gradients, rounded once.

    Raises:
        TypeError: an ``attn_mask`` that is neither boolean nor a floating ampref Tensor.
        ValueError: ``dropout_p`` other than 0 (attention dropout would need a seed; use
            :func:`dropout` on the attention weights); with ``enable_gqa``, key/value
            head counts that do not divide the query's.
    """
    q, k, v = (check_tensor(t, "scaled_dot_product_attention") for t in (query, key, value))
    if dropout_p != 0.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be 0.0, got {dropout_p!r} "
                         "(ampref's dropout is seeded: apply F.dropout(..., seed=...) instead)")
    mask, bias = None, None
    if isinstance(attn_mask, Tensor):  # additive: a floating engine tensor
        bias = attn_mask.detach()  # a constant: no gradient flows to it
    elif attn_mask is not None:
        mask = np.asarray(attn_mask.numpy() if isinstance(attn_mask, IndexTensor)
                          else attn_mask)
        if mask.dtype != bool:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be boolean (True = "
                            f"attend) or a floating ampref.Tensor (added to the scores), got "
                            f"dtype {mask.dtype}")
    is_causal = check_flag("is_causal", is_causal)
    group = _group(q, k, v) if check_flag("enable_gqa", enable_gqa) else 1
    if scale is not None:
        scale = check_real("scaled_dot_product_attention scale", scale)
        if abs(scale) > float(np.finfo(np.float32).max):  # the spec multiplies by fl32(scale)
            raise ValueError(f"scaled_dot_product_attention: scale must be a finite float32 "
                             f"value (|scale| <= 3.4e38), got {scale!r}")
    (q, k, v), _, listed = autocast_inputs("scaled_dot_product_attention", [q, k, v])
    with nested_ops(listed):
        k, v = _repeat_heads(k, group), _repeat_heads(v, group)
        sc = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
        s = mul(matmul(q, transpose(k, -2, -1), accumulation=accumulation), float(sc))
        L, S = q.shape[-2], k.shape[-2]
        block = np.zeros((L, S), dtype=bool)
        if is_causal:
            block |= np.triu(np.ones((L, S), dtype=bool), k=1)
        if mask is not None:
            block = block | ~mask
        if block.any():
            s = masked_fill(s, block, -np.inf)
        if bias is not None:  # in the scores' format (torch requires the query's dtype)
            s = add(s, bias if bias.format == s.format else to_format(bias, s.format))
        return matmul(softmax(s, -1), v, accumulation=accumulation)


def _group(q: Tensor, k: Tensor, v: Tensor) -> int:
    """Query heads per key/value head under ``enable_gqa`` (heads on axis -3)."""
    if q.ndim < 3 or k.ndim < 3 or v.ndim < 3:
        raise ValueError(f"scaled_dot_product_attention: enable_gqa needs heads on axis -3 "
                         f"(..., heads, L, E), got query {q.shape}, key {k.shape}")
    hq, hk, hv = q.shape[-3], k.shape[-3], v.shape[-3]
    if hk != hv or hk == 0 or hq % hk:
        raise ValueError(f"scaled_dot_product_attention: enable_gqa needs key and value "
                         f"head counts equal and dividing the query's {hq}, got key {hk} "
                         f"and value {hv}")
    return hq // hk


def _repeat_heads(x: Tensor, group: int) -> Tensor:
    """Each head ``group`` times in a row (axis -3); the backward of the broadcast sums
    a head's copies exactly, rounded once."""
    if group == 1:
        return x
    *lead, h, s, e = x.shape
    wide = broadcast_to(reshape(x, (*lead, h, 1, s, e)), (*lead, h, group, s, e))
    return reshape(wide, (*lead, h * group, s, e))
