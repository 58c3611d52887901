"""gather, one_hot and constant padding (ENG-GTH-001): values picked, labels widened,
borders added, as torch's; never rounded except a padding value (a weak scalar,
ENG-PRM-001).

``gather(x, dim, index)``: ``out[i][j][k] = x[i][index[i][j][k]][k]`` for dim 1 (and
likewise for any dim); the index has x's number of dims, each other dim at most x's,
and values in [0, size of dim). The gradient scatters back: repeated positions are added
in float64 in index order and rounded once (ENG-IDX-001's rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..indices import IndexTensor
from ..tensor import Tensor, round_to
from .core import check_tensor, host_index, make, one_dim

__all__ = ["gather", "one_hot", "pad"]


def _gather_index(x: Tensor, axis: int, index: Any) -> np.ndarray:
    idx = np.array(host_index(x.backend, index))
    if idx.dtype.kind not in "iu":
        raise TypeError(f"gather: the index must hold integers, got dtype {idx.dtype}")
    if idx.ndim != x.ndim:
        raise ValueError(f"gather: the index must have the input's {x.ndim} dims, got "
                         f"shape {idx.shape}")
    for d, (n, m) in enumerate(zip(idx.shape, x.shape, strict=True)):
        if d != axis and n > m:
            raise ValueError(f"gather: index shape {idx.shape} exceeds the input's "
                             f"{x.shape} in dim {d}")
    if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= x.shape[axis]):
        raise ValueError(f"gather: index values must lie in [0, {x.shape[axis]}) for dim "
                         f"{axis}, got [{int(idx.min())}, {int(idx.max())}]")
    return idx.astype(np.int64)


def gather(input: Tensor, dim: int, index: Any) -> Tensor:
    """Values of ``input`` at ``index`` along ``dim`` (module docstring).

    Raises:
        TypeError: a non-integer index. ValueError: wrong dims, an index dim larger
            than the input's, or a value out of range (each named).
    """
    x = check_tensor(input, "gather")
    axis = one_dim(x, dim)
    idx = _gather_index(x, axis, index)
    be = x.backend
    # positions of every output element in x, as full index arrays
    grid: list[Any] = list(np.indices(idx.shape, sparse=True))
    grid[axis] = idx
    where = tuple(be.asarray(np.broadcast_to(g, idx.shape)) for g in grid)
    out = x.data[where]

    def bwd(g: Any) -> tuple[Any]:
        acc = be.xp.zeros(x.shape, dtype=be.xp.float64)
        be.xp.add.at(acc, where, g.astype(be.xp.float64))
        return (round_to(be, acc, x.format),)
    return make(be, out, x.format, "gather", [x], bwd)


def one_hot(tensor: Any, num_classes: int = -1) -> IndexTensor:
    """int64 of shape (*tensor.shape, num_classes): 1 at each label, 0 elsewhere;
    ``num_classes=-1`` takes the largest label + 1.

    Raises:
        TypeError: labels not an integer tensor, ``num_classes`` not an int.
        ValueError: a negative label, or one >= ``num_classes`` (torch refuses both).
    """
    if not isinstance(tensor, IndexTensor) or tensor.dtype != "int64":
        raise TypeError(f"one_hot takes an int64 tensor of labels, got "
                        f"{getattr(tensor, 'dtype', type(tensor).__name__)}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, (int, np.integer)):
        raise TypeError(f"one_hot: num_classes must be an int, got {num_classes!r}")
    be = tensor.backend
    labels = np.asarray(be.to_numpy(tensor.data))
    if labels.size and int(labels.min()) < 0:
        raise ValueError("one_hot: class values must be non-negative")
    n = int(num_classes) if num_classes != -1 else (int(labels.max()) + 1 if labels.size else 0)
    if labels.size and int(labels.max()) >= n:
        raise ValueError(f"one_hot: class values must be smaller than num_classes = {n}, got "
                         f"{int(labels.max())}")
    out = (labels[..., None] == np.arange(n)).astype(np.int64)
    return IndexTensor(be.asarray(out), be)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",
        value: float | None = None) -> Tensor:
    """``input`` with ``pad = (left, right, top, bottom, ...)`` elements added to the last
    dims (the last dim first, as torch) holding ``value`` (0 when None; a weak scalar:
    through float32 to the format). The gradient is the inner region's.

    Raises:
        ValueError: a mode other than "constant", an odd-length or too long ``pad``, a
            negative amount (torch's cropping is not provided).
        TypeError: an amount that is not an int.
    """
    x = check_tensor(input, "pad")
    if mode != "constant":
        raise ValueError(f"pad: mode {mode!r} is not provided; choices: constant")
    amounts = list(pad)
    if len(amounts) % 2 or len(amounts) // 2 > x.ndim:
        raise ValueError(f"pad: {tuple(amounts)} must hold a (before, after) pair for each of "
                         f"at most {x.ndim} trailing dims")
    for a in amounts:
        if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
            raise TypeError(f"pad: amounts must be ints, got {a!r}")
        if a < 0:
            raise ValueError(f"pad: negative amounts (cropping) are not provided, got {a}")
    widths = [(0, 0)] * x.ndim
    for k in range(len(amounts) // 2):
        widths[x.ndim - 1 - k] = (int(amounts[2 * k]), int(amounts[2 * k + 1]))
    be = x.backend
    fill = round_to(be, be.xp.asarray([0.0 if value is None else _real(value)],
                                      dtype=be.xp.float64), x.format)[0]
    out = be.xp.pad(x.data, widths, mode="constant", constant_values=fill)
    inner = tuple(slice(lo, lo + n) for (lo, _), n in zip(widths, x.shape, strict=True))
    return make(be, out, x.format, "pad", [x], lambda g: (g[inner],))


def _real(v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise TypeError(f"pad: value must be a real number, got {type(v).__name__}: {v!r}")
    return float(v)
