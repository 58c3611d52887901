"""Atomic file writes: nothing is lost when a write fails.

The content goes to a temporary file in the target's folder, is flushed and fsynced,
and only then renamed over the target (``os.replace`` is atomic on POSIX and Windows),
so a failed or interrupted write leaves the previous file intact and no temporary file.
"""

from __future__ import annotations

import os
import tempfile
from typing import IO, Callable

__all__ = ["atomic_write", "atomic_write_with"]


def atomic_write_with(path: str | os.PathLike[str], write: Callable[[IO[bytes]], object]) -> None:
    """Call ``write(f)`` on a temporary binary file, then rename it to ``path``.

    Raises:
        FileNotFoundError: the target's folder does not exist (named; no temporary file
            name in the message).
    """
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot write {os.fspath(path)!r}: folder {folder!r} "
                                "does not exist")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
        # mkstemp creates 0600; a written file gets the mode open() would give it (0666
        # less the umask), or the mode of the file it replaces
        mode = os.stat(path).st_mode & 0o777 if os.path.exists(path) else 0o666 & ~_umask()
        os.chmod(tmp, mode)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _umask() -> int:
    """The process umask (read by setting and restoring it: POSIX offers no getter)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_with(path, lambda f: f.write(text.encode("utf-8")))
