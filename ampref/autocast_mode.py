"""Autocast: per-op precision policies as data, and jmp-style whole-model policies.

``with ampref.autocast("cuda", dtype=ampref.float16):`` (torch's call shape; ``"cuda"``
selects the torch-cuda policy, ``"cpu"`` the torch-cpu one) makes every engine op look up
its aten name in the policy (a TOML file shipped as ``ampref.policies`` or a user's
file) and cast its eligible inputs as torch's autocast does (specs/autocast.md, AUT-*):

* ``lower_precision_fp``: eligible inputs -> the autocast format (fp32 leaf weights
  that require grad are cast once per region and cached, AUT-CAC-*);
* ``fp32``: eligible fp16/bf16 inputs -> float32;
* ``fp32_set_opt_dtype``: inputs untouched, the op outputs float32 (``dtype=float32``);
* ``promote``: all eligible inputs -> the widest of them (fp16 with bf16 raises);
* ``banned``: raises with torch's advice;
* unlisted ops run on their inputs with ordinary promotion.

Eligible means floating and not float64 (AUT-ELI-001). Regions nest: the inner one
overrides and the outer state is restored on exit; the weight cache is cleared when the
outermost region exits. The state is per thread/context (``contextvars``), never a
process-global flag. Outputs are never cast back on exit.
"""

from __future__ import annotations

import contextvars
import os
import sys
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .formats import Format, get_format

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = [
    "CATEGORIES",
    "MixedPolicy",
    "Policy",
    "DEVICE_POLICIES",
    "autocast",
    "get_policy",
    "load_policy",
    "parse_policy",
    "policy_names",
]

CATEGORIES = ("lower_precision_fp", "fp32", "fp32_set_opt_dtype", "fp32_append_dtype",
              "promote", "banned")


@dataclass(frozen=True, kw_only=True)
class Policy:
    """A per-op cast policy: aten op name -> category (data, from a TOML file)."""

    name: str
    default_dtype: Format
    categories: dict[str, str]
    advice: dict[str, str] = field(default_factory=dict)
    source: str = ""

    def __post_init__(self) -> None:
        base: dict[str, str] = {}
        for name, cat in self.categories.items():
            base.setdefault(name.split(".")[0], cat)
        object.__setattr__(self, "_base", base)

    def category(self, op: str) -> str | None:
        """Category of an op, or None if unlisted. An overload-less name (``softmax``)
        matches its overloads (``softmax.int``): aten overloads of one op share a
        category in torch's lists (AUT-POL-002)."""
        hit = self.categories.get(op)
        return hit if hit is not None else self._base.get(op.split(".")[0])  # type: ignore[attr-defined]


def _shipped() -> Any:
    """The folder of shipped policy files (package data ``ampref.policies``)."""
    return resources.files("ampref.policies")


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
        entry = _shipped().joinpath(f"{name_or_path}.toml")
        if not entry.is_file():
            raise ValueError(f"unknown autocast policy {str(name_or_path)!r}; shipped policies: "
                             f"{', '.join(policy_names())}, or a path to a .toml file, or a "
                             f"jmp string like 'params=float32,compute=float16,output=float32'")
        return parse_policy(entry.read_bytes(), f"ampref.policies/{name_or_path}.toml")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read autocast policy {str(path)!r}: {e.strerror or e}") from e
    return parse_policy(data, str(path))


def parse_policy(data: bytes, source: str) -> Policy:
    """A :class:`Policy` from the bytes of a policy TOML file (``source`` names it in errors).

    Raises:
        ValueError: not UTF-8, not TOML, or not a valid policy (the fault named).
    """
    try:
        raw = tomllib.loads(data.decode("utf-8"))
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
                raise ValueError(f"policy {source!r}: op {op!r} is in both {cats[op]!r} and {cat!r}")
            cats[op] = cat
    advice = raw.get("banned_advice", {})
    if not isinstance(advice, dict) or not all(isinstance(v, str) for v in advice.values()):
        raise ValueError(f"policy {source!r}: [banned_advice] must map op names to strings")
    name = raw.get("name", Path(source).stem)
    if not isinstance(name, str):
        raise ValueError(f"policy {source!r}: name must be a string, got {name!r}")
    return Policy(name=name, default_dtype=get_format(raw["default_dtype"]), categories=cats,
                  advice=dict(advice), source=source)


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
    from .tensor import Tensor

    if isinstance(x, Tensor):
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


# -- the autocast state ------------------------------------------------------------------

@dataclass(frozen=True)
class _State:
    enabled: bool
    dtype: Format | None
    policy: Policy | MixedPolicy | None
    cache_enabled: bool
    suspended: bool = False  # inside a listed op: nested ops are not re-cast


_STATE: contextvars.ContextVar[_State] = contextvars.ContextVar(
    "ampref_autocast", default=_State(False, None, None, True))
_DEPTH: contextvars.ContextVar[int] = contextvars.ContextVar("ampref_autocast_depth", default=0)
# weight-cast cache: id(weight) -> (weakref to weight, cast tensor); cleared at depth 0
_CACHE: contextvars.ContextVar[dict[int, tuple[Any, Any]] | None] = contextvars.ContextVar(
    "ampref_autocast_cache", default=None)


#: torch's device types and the shipped policy that reproduces each one's op lists
DEVICE_POLICIES = {"cuda": "torch-cuda", "cpu": "torch-cpu"}


@contextmanager
def autocast(device_type: str, dtype: str | Format | None = None, enabled: bool = True,
             cache_enabled: bool = True, *,
             policy: str | Path | Policy | MixedPolicy | None = None) -> Iterator[None]:
    """Run engine ops inside under a precision policy (AUT-CTX-*), in torch's call shape.

    Args:
        device_type: ``"cuda"`` (the torch-cuda policy) or ``"cpu"`` (torch-cpu); the
            numerics run wherever the tensors live, the device type picks the op lists.
        dtype: the low-precision format (``ampref.float16``, ``"bfloat16"``, ...); None
            takes the policy's default (torch-cuda: float16, torch-cpu: bfloat16).
        enabled: False turns autocast off inside (nesting restores the outer state).
        cache_enabled: cache fp32 -> low-precision casts of leaf weights in the region.
        policy: ampref's extra: any other policy instead of the device type's: a shipped
            policy name, a TOML path, a :class:`Policy`, a jmp string
            (``"params=float32,compute=bfloat16,output=float32"``: every op computes in
            the compute format) or a :class:`MixedPolicy`.

    Raises:
        ValueError: unknown device type or policy (choices listed), or a dtype other
            than float16/bfloat16 (torch's supported autocast dtypes; torch only warns
            and disables on CPU).
        TypeError: ``enabled``/``cache_enabled`` not bools.
    """
    if device_type not in DEVICE_POLICIES:
        raise ValueError(f"unknown autocast device_type {device_type!r}; choose one of "
                         f"{', '.join(DEVICE_POLICIES)} (other policies: policy=...)")
    enabled = _flag("enabled", enabled)
    cache_enabled = _flag("cache_enabled", cache_enabled)
    if policy is None:
        policy = DEVICE_POLICIES[device_type]
    pol: Policy | MixedPolicy
    if isinstance(policy, (Policy, MixedPolicy)):
        pol = policy
    elif isinstance(policy, str) and "=" in policy:
        pol = get_policy(policy)
    else:
        pol = load_policy(policy)
    if isinstance(pol, MixedPolicy):
        fmt = pol.compute if dtype is None else get_format(dtype)
    else:
        fmt = pol.default_dtype if dtype is None else get_format(dtype)
        if fmt.name not in ("float16", "bfloat16"):
            raise ValueError(f"autocast dtype must be float16 or bfloat16 under policy "
                             f"{pol.name!r}, got {fmt.name}")
    token = _STATE.set(_State(enabled, fmt, pol, cache_enabled))
    depth = _DEPTH.get()
    dtoken = _DEPTH.set(depth + 1)
    ctoken = _CACHE.set({}) if depth == 0 else None
    try:
        yield
    finally:
        _DEPTH.reset(dtoken)
        if ctoken is not None:
            _CACHE.reset(ctoken)  # outermost exit clears the weight cache (AUT-CAC-002)
        _STATE.reset(token)


def _flag(name: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise TypeError(f"autocast {name} must be a bool, got {type(v).__name__}: {v!r}")
    return v


@contextmanager
def suspended() -> Iterator[None]:
    """Nested ops of a listed op run without re-casting (torch excludes the key)."""
    st = _STATE.get()
    token = _STATE.set(_State(st.enabled, st.dtype, st.policy, st.cache_enabled, True))
    try:
        yield
    finally:
        _STATE.reset(token)


def _eligible(t: Any) -> bool:
    return t.format.name != "float64"


def _cast(t: Any, fmt: Format, cacheable: bool) -> Any:
    from .functional import to_format

    if t.format == fmt or not _eligible(t):
        return t
    st = _STATE.get()
    cache = _CACHE.get()
    if (cacheable and st.cache_enabled and cache is not None and t.format.name == "float32"
            and t.requires_grad and t.is_leaf):
        hit = cache.get(id(t))
        if hit is not None and hit[0]() is t:
            return hit[1]
        out = to_format(t, fmt)
        cache[id(t)] = (weakref.ref(t), out)
        return out
    return to_format(t, fmt)


def _prioritize(start: Format, fmts: list[Format], op: str) -> Format:
    """torch's at::autocast::prioritize folded over the eligible inputs (AUT-CAT-004)."""
    current = start
    for nxt in fmts:
        if current.name == "float32" or nxt.name == "float32":
            current = get_format("float32")
        elif current != nxt:
            raise TypeError(f"Unexpected floating ScalarType in at::autocast::prioritize: op {op!r} "
                            f"mixes {current.name} and {nxt.name} under {start.name} autocast "
                            "(torch refuses to promote between float16 and bfloat16)")
    return current


def cast_inputs(op: str, tensors: list[Any]) -> tuple[list[Any], Format | None, bool]:
    """Apply the active policy to op's tensor inputs (AUT-CAT-*).

    Returns (inputs, forced output format or None, listed). ``listed`` tells the op to
    run its nested ops with autocast suspended.
    """
    st = _STATE.get()
    if not st.enabled or st.policy is None or st.suspended:
        return tensors, None, False
    assert st.dtype is not None  # set together with the policy
    if isinstance(st.policy, MixedPolicy):
        return [_cast(t, st.dtype, True) for t in tensors], None, True
    cat = st.policy.category(op)
    if cat is None:
        return tensors, None, False
    if cat == "banned":
        advice = st.policy.advice.get(op, "")
        raise RuntimeError(f"{op} is banned under autocast policy {st.policy.name!r}. {advice}")
    if cat == "lower_precision_fp":
        return [_cast(t, st.dtype, True) for t in tensors], None, True
    if cat == "fp32":
        return [_cast(t, get_format("float32"), False) for t in tensors], None, True
    if cat in ("fp32_set_opt_dtype", "fp32_append_dtype"):
        first_ok = bool(tensors) and _eligible(tensors[0])
        return tensors, (get_format("float32") if first_ok else None), True
    # promote: start at the autocast dtype, any fp32 -> fp32, fp16 with bf16 raises
    target = _prioritize(st.dtype, [t.format for t in tensors if _eligible(t)], op)
    return [_cast(t, target, False) for t in tensors], None, True
