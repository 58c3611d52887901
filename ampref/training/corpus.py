"""The training text: the embedded public-domain text or a user's file, read up to a cap,
and the seeded batches drawn from it (TRN-DAT-001, TRN-DAT-002)."""

from __future__ import annotations

import sys
from importlib import resources

import numpy as np

from ampref.kernels.srhash import random_bits
from .config import TrainError

__all__ = ["MAX_DATA_BYTES", "Corpus", "load_corpus"]

MAX_DATA_BYTES = 8 * 2**20  # --data files are read up to this size (the rest is ignored)


def load_corpus(path: str | None) -> str:
    """The embedded text (the US Declaration of Independence, public domain) or a file."""
    if path is None:
        text = resources.files("ampref.training").joinpath("declaration.txt")
        return text.read_text(encoding="utf-8")
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_DATA_BYTES + 1)
    except OSError as e:
        raise TrainError(f"cannot read --data {path!r}: {e.strerror or e}") from None
    if len(raw) > MAX_DATA_BYTES:
        # a character-level toy model needs little text; reading a huge file (or a device
        # such as /dev/zero) whole would exhaust memory
        raw = raw[:MAX_DATA_BYTES]
        while raw and (raw[-1] & 0xC0) == 0x80:  # do not cut a UTF-8 sequence in half
            raw = raw[:-1]
        if raw and raw[-1] >= 0xC0:
            raw = raw[:-1]
        print(f"ampref train: note: --data {path!r} is larger than {MAX_DATA_BYTES // 2**20} MiB; "
              "training on its first part", file=sys.stderr)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TrainError(f"cannot read --data {path!r}: not UTF-8 text ({e})") from None


class Corpus:
    def __init__(self, text: str, context: int) -> None:
        if "\x00" in text:
            raise TrainError("the data contains NUL characters; give a plain text file")
        # characters sorted by code point; ids by search (same ids as chars.index, fast)
        points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        table = np.unique(points)
        self.chars = [chr(int(c)) for c in table]
        self.ids = np.searchsorted(table, points).astype(np.int64)
        n = len(self.ids)
        split = int(n * 0.9)
        self.train, self.val = self.ids[:split], self.ids[split:]
        if len(self.val) <= context + 1 or len(self.train) <= context + 1:
            raise TrainError(f"the data is too short: {n} characters for a context of {context} "
                             f"(need more than {10 * (context + 2)})")
        self.context = context

    @property
    def vocab(self) -> int:
        return len(self.chars)

    def batch(self, seed: int, step: int, size: int, split: str = "train") -> np.ndarray:
        """Rows of context+1 ids; row i of step s starts at hash(seed, s*size + i)."""
        src = self.train if split == "train" else self.val
        hi = len(src) - self.context - 1
        words = random_bits(seed ^ 0x5EED, step * size, size).astype(np.uint64)
        starts = ((words * np.uint64(hi)) >> np.uint64(32)).astype(np.int64)
        return np.stack([src[s:s + self.context + 1] for s in starts])
