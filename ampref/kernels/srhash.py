"""Counter-based random bits for reproducible, backend-independent stochastic rounding.

The random word for element ``i`` (flat, C order) under seed ``s`` is a pure function
``bits(s, i)`` of two integers, so any backend (NumPy, CuPy, a C kernel) that evaluates
the same integer recipe gets the same bits, in any order, chunked or not. There is no
global RNG state (spec clause FMT-SR-002).

Recipe, all arithmetic on uint32 with wrap-around (``fmix32`` is the MurmurHash3
finaliser)::

    fmix32(h) = h ^= h >> 16; h *= 0x85EBCA6B; h ^= h >> 13; h *= 0xC2B2AE35; h ^= h >> 16
    k1 = fmix32(seed_lo ^ 0x9E3779B9)                 # seed = seed_hi * 2^32 + seed_lo
    k2 = fmix32(seed_hi ^ 0x7F4A7C15 ^ k1)
    bits(s, i) = fmix32(fmix32(i_lo ^ k1) ^ i_hi ^ k2)  # i = i_hi * 2^32 + i_lo
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["SEED_LIMIT", "check_seed", "fmix32", "keys", "random_bits", "random_bits_at",
           "random_bits_scalar"]

SEED_LIMIT = 1 << 64
_M32 = 0xFFFFFFFF


def fmix32(h: Any) -> Any:
    """MurmurHash3's 32-bit finaliser on a uint32 array (or a Python int)."""
    if isinstance(h, int):
        h ^= h >> 16
        h = (h * 0x85EBCA6B) & _M32
        h ^= h >> 13
        h = (h * 0xC2B2AE35) & _M32
        return h ^ (h >> 16)
    h = h ^ (h >> np.uint32(16))
    h = h * np.uint32(0x85EBCA6B)
    h = h ^ (h >> np.uint32(13))
    h = h * np.uint32(0xC2B2AE35)
    return h ^ (h >> np.uint32(16))


def check_seed(seed: object) -> int:
    """Validate a stochastic-rounding seed: an int in [0, 2^64)."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int in [0, 2**64), got {type(seed).__name__}: {seed!r}")
    if not 0 <= int(seed) < SEED_LIMIT:
        raise ValueError(f"seed must be in [0, 2**64), got {seed}")
    return int(seed)


def keys(seed: int) -> tuple[int, int]:
    """The two 32-bit hash keys derived from a checked 64-bit seed (FMT-SR-002); device
    kernels take these keys instead of the seed."""
    k1 = fmix32((seed & _M32) ^ 0x9E3779B9)
    k2 = fmix32((seed >> 32) ^ 0x7F4A7C15 ^ k1)
    return k1, k2


def random_bits_at(seed: int, index: Any, xp: Any = np) -> npt.NDArray[np.uint32]:
    """Random words for an array of flat element indices (any integer dtype >= 0)."""
    k1, k2 = keys(check_seed(seed))
    idx = index.astype(xp.uint64)
    lo = (idx & xp.uint64(_M32)).astype(xp.uint32)
    hi = (idx >> xp.uint64(32)).astype(xp.uint32)
    h = fmix32(lo ^ xp.uint32(k1))
    return fmix32(h ^ hi ^ xp.uint32(k2))


def random_bits(seed: int, start: int, count: int, xp: Any = np) -> npt.NDArray[np.uint32]:
    """Random words for flat indices ``start .. start+count-1`` as uint32."""
    return random_bits_at(seed, xp.arange(start, start + count, dtype=xp.uint64), xp)


def random_bits_scalar(seed: int, index: int) -> int:
    """Pure-Python twin of :func:`random_bits` for one index (used by oracles)."""
    k1, k2 = keys(check_seed(seed))
    h = fmix32((index & _M32) ^ k1)
    return fmix32(h ^ (index >> 32) ^ k2)
