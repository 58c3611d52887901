"""``ampref.save`` / ``ampref.load``: checkpoints of state dicts without pickle (ENG-SER-001).

A file holds one object built from dicts with string keys, lists, tuples, NumPy arrays,
ampref tensors (float tensors keep their format, integer tensors their dtype), and
Python ``int``/``float``/``bool``/``str``/``None``: what ``Module.state_dict()``,
``Optimizer.state_dict()``, ``GradScaler.state_dict()`` and a script's own counters
produce. It is a NumPy ``.npz`` archive: the arrays bit for bit as ``.npy`` members and
one JSON member describing the structure. Nothing is unpickled on load (torch's
``weights_only=True`` spirit), so a file from elsewhere cannot run code.

The write is atomic (a failed write leaves the previous file intact); loading checks the
structure as strictly as saving built it and names what is wrong.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
from typing import Any

import numpy as np

from ampref.common.atomicio import atomic_write_with
from ampref.formats.table import get_format

from .creation import tensor
from .indices import IndexTensor
from .tensor import Tensor

__all__ = ["load", "save"]

_MANIFEST = "ampref_structure"
_VERSION = 1


def save(obj: Any, f: str | os.PathLike[str]) -> None:
    """Write ``obj`` to the file ``f`` (atomically).

    Raises:
        TypeError: an object of a type a checkpoint cannot hold (its path in ``obj``
            named, e.g. ``['model']['fc.weight']``).
        FileNotFoundError: the folder of ``f`` does not exist.
    """
    arrays: dict[str, np.ndarray] = {}
    structure = {"version": _VERSION, "root": _encode(obj, arrays, "")}
    members: dict[str, Any] = {**arrays, _MANIFEST: np.frombuffer(
        json.dumps(structure).encode("utf-8"), dtype=np.uint8)}
    buf = io.BytesIO()
    savez: Any = np.savez  # its stub types **kwds as its own flags; members are arrays
    savez(buf, **members)
    atomic_write_with(f, lambda out: out.write(buf.getvalue()))


def load(f: str | os.PathLike[str]) -> Any:
    """Read what :func:`save` wrote: float tensors as ampref tensors of their format,
    integer tensors as integer tensors, arrays as NumPy arrays.

    Raises:
        FileNotFoundError: no such file.
        ValueError: not an ampref checkpoint, or its structure is damaged (what is wrong
            named).
    """
    if not isinstance(f, (str, os.PathLike)):
        raise TypeError(f"load takes a path (str or os.PathLike), got {type(f).__name__}")
    if not os.path.exists(f):
        raise FileNotFoundError(f"no checkpoint at {os.fspath(f)!r}")
    if not zipfile.is_zipfile(f):
        raise ValueError(f"{os.fspath(f)!r} is not an ampref checkpoint (not an .npz archive)")
    try:
        with np.load(f, allow_pickle=False) as z:  # never unpickle: a pickle runs code
            members = {k: _member(z, k, f) for k in z.files}
    except (zipfile.BadZipFile, EOFError, OSError) as e:
        if isinstance(e, FileNotFoundError):
            raise
        raise ValueError(f"{os.fspath(f)!r} is not an ampref checkpoint (not a readable "
                         f"archive: {e})") from None
    if _MANIFEST not in members:
        raise ValueError(f"{os.fspath(f)!r} is not an ampref checkpoint (no structure member)")
    try:
        structure = json.loads(members.pop(_MANIFEST).tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{os.fspath(f)!r}: damaged structure member ({e})") from None
    if not isinstance(structure, dict) or structure.get("version") != _VERSION:
        raise ValueError(f"{os.fspath(f)!r}: unknown checkpoint version "
                         f"{structure.get('version') if isinstance(structure, dict) else '?'}")
    try:
        return _decode(structure.get("root"), members, "")
    except (KeyError, TypeError) as e:  # an entry without a field it needs, or of a wrong type
        raise ValueError(f"{os.fspath(f)!r}: damaged checkpoint structure "
                         f"({type(e).__name__}: {e})") from None


def _member(z: Any, name: str, f: str | os.PathLike[str]) -> np.ndarray:
    """One member of the archive; an object (pickled) member is refused by name."""
    try:
        return np.asarray(z[name])
    except ValueError as e:  # NumPy: "Object arrays cannot be loaded when allow_pickle=False"
        raise ValueError(f"{os.fspath(f)!r} is not an ampref checkpoint: member {name!r} is "
                         f"a pickled object, which load never unpickles ({e})") from None


def _encode(obj: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    """The JSON description of ``obj``; arrays go to ``arrays`` under a fresh name."""
    if obj is None or isinstance(obj, (bool, str)):
        return {"kind": "value", "value": obj}
    if isinstance(obj, (int, np.integer)):
        return {"kind": "int", "value": str(int(obj))}  # as text: no 2^53 limit in JSON
    if isinstance(obj, (float, np.floating)):
        return {"kind": "float", "value": float(obj).hex()}  # exact, inf and NaN included
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"checkpoint dict keys must be str, got {k!r} at {path or '/'}")
        return {"kind": "dict", "items": {k: _encode(v, arrays, f"{path}[{k!r}]")
                                          for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {"kind": type(obj).__name__,
                "items": [_encode(v, arrays, f"{path}[{i}]") for i, v in enumerate(obj)]}
    name = f"a{len(arrays)}"
    if isinstance(obj, Tensor):
        arrays[name] = obj.numpy()
        return {"kind": "tensor", "array": name, "format": obj.format.name,
                "requires_grad": obj.requires_grad}
    if isinstance(obj, IndexTensor):
        arrays[name] = obj.numpy()
        return {"kind": "index", "array": name}
    if isinstance(obj, np.ndarray) and obj.dtype.kind in "fiub":
        arrays[name] = obj
        return {"kind": "array", "array": name}
    raise TypeError(f"a checkpoint holds dicts, lists, tuples, arrays, tensors and plain "
                    f"numbers/strings; got {type(obj).__name__} at {path or '/'}")


def _decode(node: Any, arrays: dict[str, np.ndarray], path: str) -> Any:
    if not isinstance(node, dict) or "kind" not in node:
        raise ValueError(f"damaged checkpoint structure at {path or '/'}: {node!r}")
    kind = node["kind"]
    if kind == "value" and (node["value"] is None or isinstance(node["value"], (bool, str))):
        return node["value"]
    if kind == "int":
        return int(node["value"])
    if kind == "float":
        v = float.fromhex(node["value"])
        return v if not math.isnan(v) else math.nan
    if kind == "dict" and isinstance(node.get("items"), dict):
        return {k: _decode(v, arrays, f"{path}[{k!r}]") for k, v in node["items"].items()}
    if kind in ("list", "tuple") and isinstance(node.get("items"), list):
        items = [_decode(v, arrays, f"{path}[{i}]") for i, v in enumerate(node["items"])]
        return items if kind == "list" else tuple(items)
    if kind in ("tensor", "index", "array"):
        if node.get("array") not in arrays:
            raise ValueError(f"damaged checkpoint: array {node.get('array')!r} missing at "
                             f"{path or '/'}")
        a = arrays[node["array"]]
        if kind == "array":
            return a
        if kind == "index":
            return tensor(a)
        return tensor(a, get_format(node["format"]),
                      requires_grad=bool(node.get("requires_grad", False)))
    raise ValueError(f"damaged checkpoint structure at {path or '/'}: unknown entry {kind!r}")
