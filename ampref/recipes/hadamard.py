"""Transformer Engine's random Hadamard transform (RHT) for NVFP4 wgrad operands
(specs/recipes.md REC-RHT-001).

Each run of 16 elements along the last axis is multiplied by T = diag(signs) . H16 / 4,
H16 the Sylvester Hadamard matrix and ``signs`` TE's fixed vector
(``get_wgrad_sign_vector``). Every product is exact (+-x/4); the 16-term sums follow an
accumulation model of :mod:`ampref.accumulation.models` ("sequential" float32 by default: TE's
reference uses torch's float32 matmul, its kernel bf16 tensor-core MMAs).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ampref.accumulation.models import matmul
from ampref.common.checks import check_count, real_float32

__all__ = ["SIGNS", "hadamard_matrix", "rht"]

#: TE's sign vector (custom_recipes/reference_nvfp4.py, get_wgrad_sign_vector)
SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)


def hadamard_matrix(n: int = 16, signs: tuple[int, ...] | None = SIGNS) -> npt.NDArray[np.float64]:
    """diag(signs) @ H_n (Sylvester), entries +-1; ``signs=None`` leaves H_n unsigned.

    Raises:
        TypeError: ``n`` not an int, ``signs`` not a sequence.
        ValueError: ``n`` not a power of two; ``signs`` not ``n`` entries of +1 or -1.
    """
    n = check_count("n", n)
    if n & (n - 1):
        raise ValueError(f"Hadamard size must be a power of two, got {n}")
    if signs is not None:
        if isinstance(signs, (str, bytes)) or not isinstance(signs, Sequence):
            raise TypeError(f"signs must be a sequence of {n} entries +1/-1 or None, got "
                            f"{type(signs).__name__}: {signs!r}")
        if len(signs) != n or any(isinstance(s, bool) or s not in (1, -1) for s in signs):
            raise ValueError(f"signs must be {n} entries, each +1 or -1, got {signs!r}")
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h if signs is None else np.asarray(signs, np.float64)[:, None] * h


def rht(x2: npt.NDArray[np.float32], accumulation: str = "sequential") -> npt.NDArray[np.float32]:
    """x2 (M, N) with N a multiple of 16 -> float32 (M, N): each 16-run times T.

    Raises:
        TypeError: not an array of real numbers.
        ValueError: not 2-D, or N is not a multiple of 16 (TE refuses such operands too).
    """
    x2 = real_float32("x2", x2)
    if x2.ndim != 2:
        raise ValueError(f"rht needs a 2-D (M, N) array, got shape {x2.shape}")
    M, N = x2.shape
    if N % 16:
        raise ValueError(f"the Hadamard transform needs the last axis to be a multiple of 16, "
                         f"got {N}")
    t = hadamard_matrix() * 0.25
    flat = x2.reshape(-1, 16)
    out = matmul(flat, t, input_format="float32", accumulation=accumulation)
    return out.reshape(M, N)
