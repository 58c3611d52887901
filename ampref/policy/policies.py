"""Autocast policies as data: per-op cast categories (torch's lists, TOML files) and
jmp-style whole-model policies (``"params=float32,compute=bfloat16,output=float32"``).

A :class:`Policy` maps aten op names to categories (specs/autocast.md AUT-POL-*); the
shipped ones are package data (``ampref.policy.shipped``, single source ``specs/policies/``).
What an op does under a policy is decided by :mod:`ampref.policy.autocast`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ampref.formats.table import Format, get_format

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "CATEGORIES",
    "MixedPolicy",
    "Policy",
    "get_policy",
    "load_policy",
    "parse_policy",
    "policy_names",
]

CATEGORIES = ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype",
              "promote", "banned", "unlisted")


@dataclass(frozen=True, kw_only=True)
class Policy:
    """A per-op cast policy: aten op name -> category (data, from a TOML file)."""

    name: str
    default_dtype: Format
    categories: Mapping[str, str]
    advice: Mapping[str, str] = field(default_factory=dict)
    source: str = ""
    #: op -> the torch release whose lists first gave it its category here (unlisted in
    #: earlier releases): the file states one release's lists, this says which rows moved
    listed_since: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # read-only views of private copies: a policy is data, and shipped policies are
        # loaded once and shared by every autocast region
        object.__setattr__(self, "categories", MappingProxyType(dict(self.categories)))
        object.__setattr__(self, "advice", MappingProxyType(dict(self.advice)))
        object.__setattr__(self, "listed_since", MappingProxyType(dict(self.listed_since)))
        base: dict[str, str] = {}
        for name, cat in self.categories.items():
            if cat != "unlisted":  # an exception to its base name, never a base itself
                base.setdefault(name.split(".")[0], cat)
        object.__setattr__(self, "_base", base)

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # the read-only views do not pickle; a policy travels as its plain fields
        return (_policy_from_fields, (self.name, self.default_dtype, dict(self.categories),
                                      dict(self.advice), self.source, dict(self.listed_since)))

    def category(self, op: str) -> str | None:
        """Category of an op, or None if unlisted. An overload-less name (``softmax``)
        matches its overloads (``softmax.int``), as aten overloads of one op mostly share
        a category in torch's lists (AUT-POL-002); an overload the file names under
        ``unlisted`` is the exception (torch's CUDA lists have ``conv2d`` but not
        ``conv2d.padding``)."""
        hit = self.categories.get(op)
        if hit == "unlisted":
            return None
        return hit if hit is not None else self._base.get(op.split(".")[0])  # type: ignore[attr-defined]


def _policy_from_fields(name: str, default_dtype: Format, categories: dict[str, str],
                        advice: dict[str, str], source: str,
                        listed_since: dict[str, str]) -> Policy:
    return Policy(name=name, default_dtype=default_dtype, categories=categories, advice=advice,
                  source=source, listed_since=listed_since)


def _shipped() -> Any:
    """The folder of shipped policy files (package data ``ampref.policy.shipped``)."""
    return resources.files("ampref.policy.shipped")


def policy_names() -> list[str]:
    """Names of the shipped policy files."""
    return sorted(e.name[:-5] for e in _shipped().iterdir() if e.name.endswith(".toml"))


def load_policy(name_or_path: str | Path) -> Policy:
    """A shipped policy by name (``torch-cuda``, ``torch-cpu``) or a user's TOML file.

    The file has ``name``, ``default_dtype`` and an ``[ops]`` table whose keys are the
    categories (:data:`CATEGORIES`) and whose values are lists of aten op names;
    ``[banned_advice]`` maps banned ops to the message raised. Shipped policies are
    package data read with :mod:`importlib.resources` (their single source is
    ``specs/policies/`` in the repository).

    Raises:
        ValueError: unknown name (shipped names listed), unreadable, non-UTF-8 or
            malformed file, unknown category, a category that is not a list of strings,
            or an op listed in two categories.
        TypeError: ``name_or_path`` is neither a str nor a path.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"policy must be a name or a path, got {type(name_or_path).__name__}: "
                        f"{name_or_path!r}")
    path = Path(name_or_path)
    if not path.suffix and not path.exists():
        return _load_shipped(str(name_or_path))
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read autocast policy {str(path)!r}: {e.strerror or e}") from e
    return parse_policy(data, str(path))


@lru_cache(maxsize=None)
def _load_shipped(name: str) -> Policy:
    """A shipped policy, parsed once per process (every ``autocast`` region names one; the
    policy is immutable, so sharing it is safe)."""
    entry = _shipped().joinpath(f"{name}.toml")
    if not entry.is_file():
        raise ValueError(f"unknown autocast policy {name!r}; shipped policies: "
                         f"{', '.join(policy_names())}, or a path to a .toml file, or a "
                         f"jmp string like 'params=float32,compute=float16,output=float32'")
    return parse_policy(entry.read_bytes(), f"ampref.policy.shipped/{name}.toml")


def _check_bytes_and_source(data: Any, source: Any) -> None:
    """parse_policy's argument types, named before anything is decoded."""
    if not isinstance(source, str):
        raise TypeError(f"parse_policy: source must be a str naming the policy, got "
                        f"{type(source).__name__}: {source!r}")
    if not isinstance(data, (bytes, bytearray)):
        raise TypeError(f"parse_policy: data must be the bytes of a policy file, got "
                        f"{type(data).__name__} (for a path, use load_policy)")


def parse_policy(data: bytes, source: str) -> Policy:
    """A :class:`Policy` from the bytes of a policy TOML file (``source`` names it in errors).

    Raises:
        TypeError: ``data`` not bytes (a path or text: read it with :func:`load_policy`),
            ``source`` not a str.
        ValueError: not UTF-8, not TOML, or not a valid policy (the fault named).
    """
    _check_bytes_and_source(data, source)
    try:
        raw = tomllib.loads(bytes(data).decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"autocast policy {source!r} is not UTF-8 text: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"autocast policy {source!r} is not valid TOML: {e}") from None
    ops = raw.get("ops")
    if not isinstance(ops, dict) or "default_dtype" not in raw:
        raise ValueError(f"policy file {source!r} needs 'default_dtype' and an [ops] table")
    if not isinstance(raw["default_dtype"], str):
        raise ValueError(f"policy {source!r}: default_dtype must be a format name string, got "
                         f"{raw['default_dtype']!r}")
    cats: dict[str, str] = {}
    for cat, names in ops.items():
        if cat not in CATEGORIES:
            raise ValueError(f"policy {source!r}: unknown category {cat!r}; "
                             f"choose from {', '.join(CATEGORIES)}")
        if not isinstance(names, list) or not all(isinstance(op, str) for op in names):
            raise ValueError(f"policy {source!r}: category {cat!r} must be a list of op name "
                             f"strings, got {names!r}")
        for op in names:
            if op in cats:
                raise ValueError(f"policy {source!r}: op {op!r} is in both {cats[op]!r} and "
                                 f"{cat!r}")
            cats[op] = cat
    advice = raw.get("banned_advice", {})
    if not isinstance(advice, dict) or not all(isinstance(v, str) for v in advice.values()):
        raise ValueError(f"policy {source!r}: [banned_advice] must map op names to strings")
    since = raw.get("listed_since", {})
    if not isinstance(since, dict) or not all(isinstance(v, str) for v in since.values()) \
            or not set(since) <= set(cats):
        raise ValueError(f"policy {source!r}: [listed_since] must map listed op names to "
                         f"release strings, got {since!r}")
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str):
        raise ValueError(f"policy {source!r}: name must be a string, got {name!r}")
    return Policy(name=name, default_dtype=get_format(raw["default_dtype"]), categories=cats,
                  advice=dict(advice), source=source, listed_since=dict(since))


# -- jmp-style whole-model policies ----------------------------------------------------

_JMP_NAMES = {"bf16": "bfloat16", "bfloat16": "bfloat16", "f16": "float16", "float16": "float16",
              "full": "float32", "f32": "float32", "float32": "float32", "f64": "float64",
              "float64": "float64", "half": "float16"}
_JMP_KEYS = {"p": "params", "params": "params", "c": "compute", "compute": "compute",
             "o": "output", "output": "output"}


@dataclass(frozen=True, kw_only=True)
class MixedPolicy:
    """jmp's whole-model policy: formats for parameters, computation and outputs."""

    params: Format
    compute: Format
    output: Format

    def __str__(self) -> str:
        return f"params={self.params.name},compute={self.compute.name},output={self.output.name}"

    def cast_to_param(self, x: Any) -> Any:
        return _cast_tree(x, self.params)

    def cast_to_compute(self, x: Any) -> Any:
        return _cast_tree(x, self.compute)

    def cast_to_output(self, x: Any) -> Any:
        return _cast_tree(x, self.output)


def _cast_tree(x: Any, fmt: Format) -> Any:
    # engine tensors are recognised by their interface (a format and .to): this layer sits
    # below the tensor and does not import it
    if isinstance(getattr(x, "format", None), Format) and callable(getattr(x, "to", None)):
        return x.to(fmt) if x.format != fmt else x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast_tree(v, fmt) for v in x)
    if isinstance(x, dict):
        return {k: _cast_tree(v, fmt) for k, v in x.items()}
    return x


def get_policy(spec: str) -> MixedPolicy:
    """Parse a jmp policy string (AUT-JMP-001).

    ``"params=float32,compute=bfloat16,output=float32"``; keys ``p|params``,
    ``c|compute``, ``o|output``; params default to float32, compute follows params,
    output follows compute. Without ``=`` one format is used for all three. Format names
    as jmp: ``bf16|bfloat16``, ``f16|float16|half``, ``full|f32|float32``, ``f64|float64``.

    Raises:
        ValueError: unknown or repeated key, unknown format name (choices listed), or a
            malformed part.
    """
    if not isinstance(spec, str):
        raise TypeError(f"policy string expected, got {type(spec).__name__}")

    def fmt(name: str) -> Format:
        key = name.strip().lower()
        if key not in _JMP_NAMES:
            raise ValueError(f"unknown format {name!r} in policy {spec!r}; choose one of "
                             f"{', '.join(_JMP_NAMES)}")
        return get_format(_JMP_NAMES[key])

    if "=" not in spec:
        f = fmt(spec)
        return MixedPolicy(params=f, compute=f, output=f)
    parts: dict[str, Format] = {}
    for part in spec.split(","):
        kv = part.split("=")
        if len(kv) != 2:
            raise ValueError(f"malformed part {part!r} of policy {spec!r}: expected key=format")
        key = kv[0].strip().lower()
        if key not in _JMP_KEYS:
            raise ValueError(f"unknown key {kv[0]!r} in policy {spec!r}; choose from "
                             f"{', '.join(_JMP_KEYS)}")
        if _JMP_KEYS[key] in parts:
            raise ValueError(f"policy {spec!r} sets {_JMP_KEYS[key]} twice (jmp would silently "
                             "keep the last one)")
        parts[_JMP_KEYS[key]] = fmt(kv[1])
    params = parts.get("params", get_format("float32"))
    compute = parts.get("compute", params)
    return MixedPolicy(params=params, compute=compute, output=parts.get("output", compute))
