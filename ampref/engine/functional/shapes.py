"""Shape ops and gathers: reshape, transpose, broadcast_to, indexing, embedding, concat,
stack; and outer, the product of a column and a row.

Values are moved, never rounded (exact); gradients of repeated indices are added in
float64 in index order and rounded once (ENG-IDX-001), embedding's weight gradient is
one exactly rounded sum per row over that row's tokens (ENG-IDX-002).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ampref.common.checks import TensorIndexError, reshape_entries

from ..indices import IndexTensor
from ..tensor import Tensor
from .elementwise import mul
from .core import (autocast_inputs, backend_of, check_tensor, dims_of, host_index, index_data,
                   make, one_dim, promote, sum_to, to_format)

__all__ = ["broadcast_to", "concat", "embedding", "index", "outer", "permute", "reshape", "stack",
           "transpose"]


def reshape(input: Tensor, shape: Sequence[int]) -> Tensor:
    """``input``'s elements in row-major order in ``shape``; one entry may be -1 (inferred
    from the others), as torch.

    Raises:
        TypeError: an entry that is not an int.
        ValueError: an entry below -1 (NumPy would read any negative entry as -1; torch
            refuses it), two -1 entries, or a shape of another size (both shapes named).
    """
    x = check_tensor(input, "reshape")
    dims = reshape_entries("reshape", tuple(shape))
    try:
        out = x.data.reshape(dims)
    except ValueError as e:
        raise ValueError(f"cannot reshape {x.shape} to {dims}: {e}") from None
    return make(x.backend, out, x.format, "reshape", [x], lambda g: (g.reshape(x.shape),))


def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """Swap dims ``dim0`` and ``dim1``; a 1-D tensor with dims 0/-1 is returned unchanged.

    Raises:
        ValueError: a dim out of range for the tensor's shape (shape named).
    """
    x = check_tensor(input, "transpose")
    dims_of(x, (dim0, dim1))
    if x.ndim < 2:
        return x
    out = x.backend.xp.swapaxes(x.data, dim0, dim1)
    return make(x.backend, out, x.format, "transpose", [x],
                 lambda g: (x.backend.xp.swapaxes(g, dim0, dim1),))


def permute(input: Tensor, dims: Sequence[int]) -> Tensor:
    """The dims reordered: dim i of the result is dim ``dims[i]`` of ``input`` (exact; the
    gradient is moved back by the inverse order).

    Raises:
        TypeError: an entry that is not an int.
        ValueError: ``dims`` does not name each dim of the tensor exactly once (shape named).
    """
    x = check_tensor(input, "permute")
    given = tuple(dims)
    order = dims_of(x, given) if given else ()
    if len(given) != x.ndim or sorted(order) != list(range(x.ndim)):
        raise ValueError(f"permute: dims {given} must name each of the {x.ndim} dims of a "
                         f"tensor of shape {x.shape} once")
    inverse = tuple(int(i) for i in np.argsort(order))
    xp = x.backend.xp
    return make(x.backend, xp.transpose(x.data, order), x.format, "permute", [x],
                lambda g: (xp.transpose(g, inverse),))


def broadcast_to(input: Tensor, shape: Sequence[int]) -> Tensor:
    x = check_tensor(input, "broadcast_to")
    be = x.backend
    out = be.xp.broadcast_to(x.data, tuple(shape))
    return make(be, out, x.format, "broadcast_to", [x], lambda g: (sum_to(be, g, x.shape),))


def index(input: Tensor, idx: Any) -> Tensor:
    """x[idx] (basic and integer-array indexing). Gradients of repeated indices add in
    float64 in index order, then round once (ENG-IDX-001)."""
    x = check_tensor(input, "index")
    be = x.backend
    if isinstance(idx, Tensor):
        # torch refuses float index tensors; truncating 0.5 to row 0 would be silent
        raise TensorIndexError(f"tensors used as indices must hold integers or bools, got "
                               f"a {idx.format.name} tensor")
    idx = index_data(idx)
    try:
        out = x.data[idx]
    except IndexError as e:  # NumPy's words, with the shape and the index named
        raise TensorIndexError(f"index {idx!r} of a tensor of shape {x.shape}: {e}") from None

    def bwd(g: Any) -> tuple[Any]:
        acc = be.xp.zeros(x.shape, dtype=be.xp.float64)
        be.xp.add.at(acc, idx, g.astype(be.xp.float64))
        return (acc,)
    return make(be, be.xp.asarray(out), x.format, "index", [x], bwd)


def embedding(input: Any, weight: Tensor) -> Tensor:
    """weight[ids]; each row of the weight gradient is the exact sum of the gradients of
    that row's tokens, rounded once (ENG-IDX-002; a zero row is +0, and a NaN or inf
    reaches only its own row, as in torch). Not autocast-listed: output in weight's
    format."""
    weight = check_tensor(weight, "embedding")
    be = weight.backend
    xp = be.xp
    # checked and grouped on the host (no device round trips); a copy, kept for backward
    ids = np.array(host_index(be, input))
    if ids.dtype.kind not in "iu":
        raise TypeError(f"embedding ids must be integers, got dtype {ids.dtype}")
    V = weight.shape[0]
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= V):
        raise ValueError(f"embedding ids must lie in [0, {V}), got range "
                         f"[{int(ids.min())}, {int(ids.max())}]")
    out = weight.data[xp.asarray(ids)]

    def bwd(g: Any) -> tuple[Any]:
        flat = ids.reshape(-1)
        G = g.reshape(flat.size, -1)
        gw = xp.zeros((V, G.shape[1]), dtype=G.dtype)
        if flat.size:
            # tokens grouped by id (a stable sort), one exact sum per group
            order = np.argsort(flat, kind="stable")
            present, starts = np.unique(flat[order], return_index=True)
            # + 0.0 turns a -0 sum into +0: an embedding row's zero gradient is +0
            gw[xp.asarray(present)] = be.segment_sum(G[xp.asarray(order)], starts) + 0.0
        return (gw,)
    return make(be, out, weight.format, "embedding", [weight], bwd)


def concat(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Concatenate along ``dim``; autocast name ``cat`` (promote under torch-cpu). Integer
    tensors only: an integer tensor (bool with int64 gives int64, as torch), e.g. a token
    sequence growing by one sampled id (ENG-INT-001)."""
    seq: list[Any] = list(tensors)
    if seq and all(isinstance(t, IndexTensor) for t in seq):
        return _concat_integers(seq, dim)  # type: ignore[return-value]
    ts = [check_tensor(t, "concat") for t in seq]
    if not ts:
        raise ValueError("concat needs at least one tensor")
    axis = one_dim(ts[0], dim)
    be = backend_of(*ts)
    ts, _, _ = autocast_inputs("cat", ts)
    fmt = promote([t.format for t in ts])
    ts = [to_format(t, fmt) for t in ts]
    out = be.xp.concatenate([t.data for t in ts], axis=axis)
    cuts = [int(c) for c in np.cumsum([t.shape[axis] for t in ts])[:-1]]

    def bwd(g: Any) -> tuple[Any, ...]:
        return tuple(be.xp.split(g, cuts, axis=axis))
    return make(be, out, fmt, "cat", ts, bwd)


def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """Join equal-shaped tensors along a new dim ``dim`` (in [-(ndim + 1), ndim]), as
    torch: exact (values moved); mixed formats promote as in ``concat`` (autocast name
    ``stack``); the gradient is split back along ``dim``.

    Raises:
        ValueError: no tensors, or shapes that differ (the first mismatch named).
    """
    ts = [check_tensor(t, "stack") for t in tensors]
    if not ts:
        raise ValueError("stack needs at least one tensor")
    for i, t in enumerate(ts[1:], 1):
        if t.shape != ts[0].shape:
            raise ValueError(f"stack needs equal shapes: tensor 0 is {ts[0].shape}, tensor {i} "
                             f"is {t.shape}")
    ts, _, _ = autocast_inputs("stack", ts)
    axis = one_dim(reshape(ts[0], (*ts[0].shape, 1)), dim)
    fmt = promote([t.format for t in ts])
    grown = [reshape(to_format(t, fmt), (*t.shape[:axis], 1, *t.shape[axis:])) for t in ts]
    return concat(grown, axis)


def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """input[i] * vec2[j] for two 1-D tensors: each product one rounding (``mul``'s
    rules, promotion and weak scalars included), as torch.outer.

    Raises:
        ValueError: an argument that is not 1-D (its shape named).
    """
    for name, v in (("input", input), ("vec2", vec2)):
        if check_tensor(v, "outer").ndim != 1:
            raise ValueError(f"outer needs 1-D tensors, got {name} of shape {v.shape}")
    return mul(reshape(input, (-1, 1)), reshape(vec2, (1, -1)))


def _concat_integers(ts: list[IndexTensor], dim: int) -> IndexTensor:
    axis = one_dim(ts[0], dim)  # type: ignore[arg-type]
    be = ts[0].backend
    kind = "bool" if all(t.dtype == "bool" for t in ts) else "int64"
    try:
        out = be.xp.concatenate([t.data.astype(kind) for t in ts], axis=axis)
    except ValueError as e:
        raise ValueError(f"concat: shapes {[t.shape for t in ts]} do not join along dim "
                         f"{dim}: {e}") from None
    return IndexTensor(out, be)
