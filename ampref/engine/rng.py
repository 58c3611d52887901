"""A counter-based generator: the whole state is (seed, counter) (ENG-RNG-001).

Draw n words = :func:`ampref.kernels.srhash.random_bits` (seed, counter .. counter + n - 1),
then counter += n. Any backend evaluating the same integer hash draws the same numbers,
and a checkpoint stores two integers.
"""

from __future__ import annotations

import math
import os
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.kernels.srhash import check_seed, random_bits

__all__ = ["Generator"]


class Generator:
    """Reproducible random numbers from (seed, counter).

    torch's names work too: ``Generator().manual_seed(7)`` restarts it at seed 7 and
    returns it; ``initial_seed()`` is the seed. Seeds are ints in [0, 2^64).
    """

    def __init__(self, seed: int = 0, counter: int = 0) -> None:
        self.seed = check_seed(seed)
        self.counter = _check_counter(counter)

    def manual_seed(self, seed: int) -> Generator:
        """Restart at ``seed`` (counter 0); returns the generator, as torch's does."""
        self.seed, self.counter = check_seed(seed), 0
        return self

    def initial_seed(self) -> int:
        return self.seed

    def draw_seed(self) -> int:
        """A fresh 64-bit seed from the next two words (for a module's own stream)."""
        lo, hi = (int(w) for w in self.bits(2))
        return lo | (hi << 32)

    def bits(self, n: int) -> npt.NDArray[np.uint32]:
        _check_memory(n)
        out = random_bits(self.seed, self.counter, n)
        self.counter += n
        return out

    def uniform(self, shape: tuple[int, ...], low: float = 0.0,
                high: float = 1.0) -> npt.NDArray[np.float32]:
        """float32 values low + (high - low) * u, u = (word >> 8) / 2^24 in [0, 1)."""
        n = int(np.prod(shape))
        u = (self.bits(n) >> np.uint32(8)).astype(np.float64) * 2.0**-24
        return (low + (high - low) * u).astype(np.float32).reshape(shape)

    def normal(self, shape: tuple[int, ...], std: float = 1.0,
               mean: float = 0.0) -> npt.NDArray[np.float32]:
        """mean + std * z, z by Box-Muller on pairs of 24-bit uniforms (u1 in (0, 1]),
        evaluated in float64 and rounded once to float32 (a sample past float32's range
        rounds to ±inf, as float32 arithmetic does). A zero mean adds nothing, so a
        sample std * z = -0.0 stays -0.0."""
        n = int(np.prod(shape))
        m = (n + 1) // 2
        w = self.bits(2 * m)
        u1 = ((w[:m] >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0**-24
        u2 = (w[m:] >> np.uint32(8)).astype(np.float64) * 2.0**-24
        r = np.sqrt(-2.0 * np.log(u1))
        z = np.concatenate([r * np.cos(2 * math.pi * u2), r * np.sin(2 * math.pi * u2)])[:n]
        with np.errstate(over="ignore"):
            v = std * z if mean == 0 else mean + std * z
            return v.astype(np.float32).reshape(shape)

    def integers(self, high: int, shape: tuple[int, ...]) -> npt.NDArray[np.int64]:
        """Integers in [0, high) by multiply-shift: (word * high) >> 32."""
        if high <= 0:
            raise ValueError(f"high must be positive, got {high}")
        n = int(np.prod(shape))
        w = self.bits(n).astype(np.uint64)
        return ((w * np.uint64(high)) >> np.uint64(32)).astype(np.int64).reshape(shape)

    def state_dict(self) -> dict[str, Any]:
        return {"seed": self.seed, "counter": self.counter}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore (seed, counter), checked as strictly as the constructor checks them."""
        if not isinstance(sd, dict) or set(sd) != {"seed", "counter"}:
            raise ValueError(f"a Generator state is a dict with keys 'seed' and 'counter', "
                             f"got {sd!r}")
        seed, counter = check_seed(sd["seed"]), _check_counter(sd["counter"])
        self.seed, self.counter = seed, counter


#: bytes a draw needs per value at its peak (uint64 indices, hash words, float64 values)
_BYTES_PER_DRAW = 32


def _check_memory(n: int) -> None:
    """Refuse a draw larger than this machine's memory before allocating it (a layer of
    absurd size gets a ValueError naming the size, not a MemoryError from NumPy)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX: let NumPy decide
        return
    if n * _BYTES_PER_DRAW > total:
        raise ValueError(f"drawing {n:,} random values needs about "
                         f"{n * _BYTES_PER_DRAW / 2**30:,.0f} GiB, more than this machine's "
                         f"{total / 2**30:,.0f} GiB: a layer or tensor of this size cannot be "
                         "built here")


def _check_counter(counter: Any) -> int:
    if isinstance(counter, (bool, np.bool_)) or not isinstance(counter, (int, np.integer)) \
            or counter < 0:
        raise ValueError(f"counter must be a non-negative int, got {counter!r}")
    return int(counter)
