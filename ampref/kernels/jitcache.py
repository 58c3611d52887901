"""numba's on-disk cache for the compiled kernels, keyed on every kernel source.

Why: numba stamps a cached function with its own file only (mtime and size up to numba
0.6x, a SHA-256 of the file later). A kernel that inlines or calls a function from another
module (``encode_numba`` and ``tensorcore_numba`` inline ``general_numba``; every module
calls ``bits``' intrinsics) embeds that function's machine code, so after an edit or an
upgrade that changed only the callee, numba would load the old code. Here every compiled
kernel is stamped with one SHA-256 over the bytes of *all* ``ampref/kernels/*.py`` files:
any change anywhere in the room invalidates every kernel's cache entry.

How: :class:`KernelLocator` is a numba cache locator (numba's own extension point, the
interface of ``numba.core.caching._CacheLocator``) put first in numba's locator list; it
claims only functions defined in this folder, so other numba users are untouched. It keeps
numba's places: ``NUMBA_CACHE_DIR`` when set, else ``__pycache__`` beside the source,
else a per-user folder, else a fresh temporary folder (a cold cache, never a stale one).

Where this cannot be installed (a numba whose cache internals differ, or
``NUMBA_CACHE_LOCATOR_CLASSES`` overriding the locator list), :data:`CACHE` is False and
the kernels compile in every process instead: slower, never stale. ``AMPREF_NUMBA_CACHE=0``
turns the disk cache off on purpose.
"""

from __future__ import annotations

import functools
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numba
from numba.core import caching

__all__ = ["CACHE", "KernelLocator", "ROOM", "install", "sources_digest"]

ROOM = Path(__file__).resolve().parent


def _room_files() -> tuple[Path, ...]:
    return tuple(sorted(ROOM.glob("*.py")))


@functools.lru_cache(maxsize=8)
def _digest(stats: tuple[tuple[str, int, int], ...]) -> str:
    # keyed on (name, mtime_ns, size) of each file, so an edit made while the process runs
    # is hashed afresh; the digest itself is over names and bytes, not over the stats
    h = hashlib.sha256()
    for name, _, _ in stats:
        h.update(name.encode() + b"\0" + (ROOM / name).read_bytes() + b"\0")
    return h.hexdigest()


def sources_digest() -> str:
    """SHA-256 (hex) over the names and bytes of every ``ampref/kernels/*.py`` file."""
    stats = tuple((p.name, p.stat().st_mtime_ns, p.stat().st_size) for p in _room_files())
    return _digest(stats)


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def _user_cache_root() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ampref-numba")


class KernelLocator(caching._CacheLocator):  # type: ignore[misc,name-defined]
    """Cache place and freshness stamp for a function defined in ``ampref/kernels``."""

    def __init__(self, py_func: Any, py_file: str, path: str) -> None:
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = path

    def get_cache_path(self) -> str:
        return self._cache_path

    def get_source_stamp(self) -> str:
        return sources_digest()

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: Any, py_file: str) -> KernelLocator | None:
        if not py_file or Path(py_file).resolve().parent != ROOM:
            return None  # not ours: numba's own locators decide
        sub = cls.get_suitable_cache_subpath(py_file)
        user_dir = getattr(numba.config, "CACHE_DIR", "")  # NUMBA_CACHE_DIR, read by numba
        candidates = [os.path.join(str(user_dir), sub)] if user_dir else []
        candidates += [str(ROOM / "__pycache__"), os.path.join(_user_cache_root(), sub)]
        for path in candidates:
            if _writable(path):
                return cls(py_func, py_file, path)
        return cls(py_func, py_file, tempfile.mkdtemp(prefix="ampref-numba-"))


def _locator_list() -> list[Any] | None:
    impl = getattr(caching, "_CacheImpl", None) or getattr(caching, "CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    return classes if isinstance(classes, list) else None


def install() -> bool:
    """Put :class:`KernelLocator` first in numba's locator list; True when the kernels may
    use ``cache=True`` (the locator is in force), False when they must not cache."""
    if os.environ.get("AMPREF_NUMBA_CACHE", "1") == "0":
        return False
    if getattr(numba.config, "CACHE_LOCATOR_CLASSES", ""):
        return False  # numba would ignore the list this module extends
    classes = _locator_list()
    if classes is None:
        return False
    if KernelLocator not in classes:
        classes.insert(0, KernelLocator)
    return True


CACHE: bool = install()
