"""Evidence bound to what produced it (``specs/certify.md`` CRT-BND-*).

Every certificate chunk names the package that computed it (the SHA-256 of every file
of the installed ``ampref`` package, ``ampref.backends`` and its CUDA sources and the
shipped policies included, wherever setuptools put them) and its environment. A rerun
into the same folder reuses a chunk only if its package and ampref version are this
run's; any other chunk is computed again, never relabelled. The pack's configuration
index lists the digest of every chunk file it used, so an edit after the pack was made
is found by ``ampref certify --check PACK`` (:mod:`ampref.certify.check`) and by
``--diff``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["chunk_digests", "package_digest", "package_files", "reusable"]


def package_files() -> dict[str, Path]:
    """Every file of the installed package by its import path (``ampref/backends/cuda/
    quantize.cu``), wherever its folder lies (the checkout maps ``backends/`` and
    ``specs/policies`` into the package)."""
    roots = {name.replace(".", "/"): _folder(name)
             for name in ("ampref", "ampref.backends", "ampref.policy.shipped")}
    out: dict[str, Path] = {}
    for name, root in roots.items():
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                out.setdefault(f"{name}/{p.relative_to(root).as_posix()}", p)
    return dict(sorted(out.items()))


def _folder(package: str) -> Path:
    """Where an installed package's files are (found without importing it here)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"package {package!r} is not installed")
    return Path(list(spec.submodule_search_locations)[0])


@cache
def package_digest() -> str:
    """SHA-256 over the names and contents of :func:`package_files` (once per process)."""
    h = hashlib.sha256()
    for name, p in package_files().items():
        h.update(name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def reusable(record: dict[str, Any], version: str) -> bool:
    """A stored chunk record this run may reuse: complete, and computed by this very
    package (digest) and version. An edited or foreign chunk is computed again."""
    env = record.get("env")
    needed = ("cell", "chunk", "checked", "mismatches", "peer_mismatches", "first", "seconds")
    return isinstance(env, dict) and all(k in record for k in needed) and \
        env.get("package") == package_digest() and env.get("ampref") == version


#: fields of a chunk record that differ between two computations of the same chunk
_VOLATILE = frozenset({"seconds", "pid"})


def chunk_digests(folders: list[Path]) -> dict[str, str]:
    """``{i/cell/chunk_NNN.json: sha256}`` for every chunk file of ``folders[i]``: the
    SHA-256 of the record without its timing and process id (two runs of one
    configuration give the same digests; any other edit changes it). A file that is not
    a JSON record is digested as it is."""
    out = {}
    for i, folder in enumerate(folders):
        for p in sorted(Path(folder).glob("*/chunk_*.json")):
            raw = p.read_bytes()
            try:
                rec = json.loads(raw)
                body = json.dumps({k: v for k, v in rec.items() if k not in _VOLATILE},
                                  sort_keys=True).encode() if isinstance(rec, dict) else raw
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = raw
            out[f"{i}/{p.parent.name}/{p.name}"] = hashlib.sha256(body).hexdigest()
    return out
