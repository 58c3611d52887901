"""``multinomial`` (ENG-SMP-001): category indices drawn with probabilities proportional
to the weights, from ampref's counter-based generator, so sampling text from a trained
model ports unchanged and repeats exactly under a seed.

Per row of weights w (1-D input: one row), all draws are taken first, row by row and
sample by sample: u_j = Generator.uniform, on the 2^-24 grid of [0, 1). A draw picks the
smallest i whose running total c_i = w_0 + ... + w_i (float64, in index order) exceeds
u_j * c_(n-1) (float64): a zero weight is never picked. Without replacement, the picked
weight is set to 0 before the row's next draw. The numbers are not torch's (its generator
differs); the distribution is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ampref.common.checks import check_flag
from .creation import resolve_generator
from .indices import IndexTensor
from .rng import Generator
from .tensor import Tensor

__all__ = ["multinomial"]


def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *,
                generator: Generator | None = None) -> IndexTensor:
    """int64 indices of shape (rows, num_samples) ((num_samples,) for a 1-D input).

    Raises:
        TypeError: ``input`` not a float tensor, ``num_samples`` not an int, ``generator``
            not a Generator.
        ValueError: ``input`` not 1-D or 2-D; a weight negative, NaN or inf; a row
            summing to 0; ``num_samples`` < 1, or above the number of nonzero weights
            without replacement (torch refuses the same).
    """
    w = _weights(input)
    if isinstance(num_samples, bool) or not isinstance(num_samples, (int, np.integer)):
        raise TypeError(f"multinomial: num_samples must be an int, got {num_samples!r}")
    with_replacement = check_flag("replacement", replacement)
    if num_samples < 1:
        raise ValueError(f"multinomial: num_samples must be >= 1, got {num_samples}")
    nonzero = int((w > 0).sum(axis=1).min())
    if not with_replacement and num_samples > nonzero:
        raise ValueError(f"multinomial: {num_samples} samples without replacement need as many "
                         f"nonzero weights per row; a row has {nonzero}")
    gen = resolve_generator(generator)
    u = gen.uniform((w.shape[0], int(num_samples))).astype(np.float64)
    out = np.empty(u.shape, np.int64)
    for r, row in enumerate(w):
        row = row.copy()
        for j in range(u.shape[1]):
            running = np.cumsum(row)
            out[r, j] = int(np.searchsorted(running, u[r, j] * running[-1], side="right"))
            if not with_replacement:
                row[out[r, j]] = 0.0
    be = input.backend
    return IndexTensor(be.asarray(out if input.ndim == 2 else out[0]), be)


def _weights(input: Any) -> np.ndarray:
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial takes a float ampref.Tensor of weights, got "
                        f"{type(input).__name__}")
    if input.ndim not in (1, 2) or input.shape[-1] == 0:
        raise ValueError(f"multinomial: weights must be 1-D or 2-D with categories, got shape "
                         f"{input.shape}")
    w = np.asarray(input.backend.to_numpy(input.data), np.float64).reshape(-1, input.shape[-1])
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("multinomial: weights must be finite and >= 0")
    if (w.sum(axis=1) <= 0).any():
        raise ValueError("multinomial: a row of weights sums to 0")
    return w
