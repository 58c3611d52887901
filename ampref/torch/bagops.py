"""aten's ``_embedding_bag`` (``nn.EmbeddingBag``, recommendation models) and its dense
backward on ampref's numerics (``specs/torch.md`` TRC-IDX-002).

Bags are torch's: a position belongs to the last offset at or before it
(``include_last_offset`` or not), ``padding_idx`` rows do not count; the integer
outputs (``offset2bag``, ``bag_size``, ``max_indices``) are torch's own op's, which
involve no rounding. The bag size of ``mean`` counts the rows that count.

Per bag: ``sum`` is the exact sum of its rows (each first
multiplied by its ``per_sample_weights`` entry in float32) rounded once, ``mean`` that
sum divided in float32 by the bag's size, ``max`` torch's selection; an empty bag is
+0. The backward gives each weight row the exact sum of what its occurrences receive
(``g`` of the bag, ``fl32(g / size)`` for ``mean``, ``fl32(g w)`` with sample weights),
rounded once, through TRC-IDX-001's scatter.

``embedding_renorm_`` (``nn.Embedding(max_norm=...)``) rescales, in place, each row the
indices name whose ``norm_type``-norm (ampref's vector norm, rounded to the weight's
dtype as torch's ``row.norm()`` is) exceeds ``max_norm``: ``scale = max_norm / (norm +
1e-7)`` in float64, then ``fl(row fl32(scale))`` in float32, rounded to the dtype. NaN
norms leave the row unchanged; an infinite norm scales by 0. float64 weights are refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .convert import from_numpy, to_numpy
from .indexops import scatter_sum
from .vecnorms import vector_norm

__all__ = ["BAGS"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_SUM, _MEAN, _MAX = 0, 1, 2


def _bags(indices: Any, offsets: Any, padding_idx: Any) -> tuple[Any, Any]:
    """Each position's bag (the last offset at or before it: with or without
    ``include_last_offset``) and whether it counts (not ``padding_idx``)."""
    bag = np.searchsorted(to_numpy(offsets).reshape(-1), np.arange(indices.size),
                          side="right") - 1
    keep = bag >= 0
    if padding_idx is not None and padding_idx >= 0:
        keep &= indices != padding_idx
    return bag, keep


def _embedding_bag(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    outs = func(*args, **kw)  # torch's bag bookkeeping (integers); its values are replaced
    weight, indices = args[0], to_numpy(args[1]).reshape(-1)
    mode = int(args[4] if len(args) > 4 else kw.get("mode", _SUM))
    if mode == _MAX:
        return outs
    psw = args[6] if len(args) > 6 else kw.get("per_sample_weights")
    padding_idx = args[8] if len(args) > 8 else kw.get("padding_idx")
    bag, keep = _bags(indices, args[2], padding_idx)
    n_bags, dim = outs[0].shape
    rows = to_numpy(weight).astype(np.float32)[indices]
    if psw is not None:
        with np.errstate(all="ignore"):
            rows = rows * to_numpy(psw).astype(np.float32)[:, None]
    dst = (bag[keep][:, None] * dim + np.arange(dim)[None, :])
    sums = scatter_sum(np.zeros(n_bags * dim, np.float32), dst, rows[keep]).reshape(n_bags, dim)
    if mode == _MEAN:
        size = np.bincount(bag[keep], minlength=n_bags).astype(np.float32)[:, None]
        with np.errstate(all="ignore"):
            sums = np.where(size > 0, sums / np.maximum(size, 1), np.float32(0))
    return (from_numpy(sums, outs[0].dtype), *outs[1:])


def _embedding_bag_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    (g, indices, offsets, _offset2bag, _bag_size, max_indices, num_weights, by_freq, mode,
     sparse, psw) = args[:11]
    padding_idx = args[11] if len(args) > 11 else kw.get("padding_idx")
    if sparse or by_freq:
        raise NotImplementedError("ampref.torch: embedding_bag backward is emulated dense "
                                  "and without scale_grad_by_freq")
    gv = to_numpy(g).astype(np.float32)
    dim = gv.shape[1]
    idx = to_numpy(indices).reshape(-1)
    bags, keep = _bags(idx, offsets, padding_idx)
    if mode == _MAX:
        rows = to_numpy(max_indices).reshape(gv.shape)  # the row each output came from
        filled = np.bincount(bags[keep], minlength=gv.shape[0]) > 0  # empty bags: none
        hit = (rows >= 0) & filled[:, None]
        dst = rows[hit] * dim + np.nonzero(hit)[1]
        out = scatter_sum(np.zeros(num_weights * dim, np.float32), dst, gv[hit])
        return from_numpy(out.reshape(num_weights, dim), g.dtype)
    contrib = gv[bags[keep]]
    with np.errstate(all="ignore"):
        if mode == _MEAN:
            size = np.bincount(bags[keep], minlength=gv.shape[0]).astype(np.float32)
            contrib = contrib / size[bags[keep]][:, None]
        if psw is not None:
            contrib = contrib * to_numpy(psw).astype(np.float32)[keep][:, None]
    dst = idx[keep][:, None] * dim + np.arange(dim)[None, :]
    out = scatter_sum(np.zeros(num_weights * dim, np.float32), dst, contrib)
    return from_numpy(out.reshape(num_weights, dim), g.dtype)


def _renorm(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """``embedding_renorm_(weight, indices, max_norm, norm_type)``, in place (module
    docstring); each distinct row once, as torch's sorted, deduplicated loop."""
    weight, indices = args[:2]
    max_norm, norm_type = float(args[2]), float(args[3])
    if weight.dtype == torch.float64:
        raise NotImplementedError("ampref.torch: embedding_renorm_ of float64 weights")
    rows = np.unique(to_numpy(indices).reshape(-1))
    if rows.size == 0:
        return weight
    w = to_numpy(weight).astype(np.float32)[rows]
    norms = to_numpy(vector_norm(from_numpy(w, torch.float32), norm_type, weight.dtype,
                                 dim=-1)).astype(np.float64)
    with np.errstate(all="ignore"):
        scale = (max_norm / (norms + 1e-7)).astype(np.float32)
        new = np.where((norms > max_norm)[:, None], w * scale[:, None], w)
    weight[torch.from_numpy(rows)] = from_numpy(new, weight.dtype)
    return weight


#: aten op name (overload packet) -> handler
BAGS: dict[str, Handler] = {
    "_embedding_bag": _embedding_bag, "_embedding_bag_forward_only": _embedding_bag,
    "_embedding_bag_backward": _embedding_bag_bwd,
    "_embedding_bag_dense_backward": _embedding_bag_bwd,
    "embedding_renorm_": _renorm,
}
