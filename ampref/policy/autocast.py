"""Autocast regions: which policy is active, and what it decides for one op call.

``with ampref.autocast("cuda", dtype=ampref.float16):`` (torch's call shape; ``"cuda"``
selects the torch-cuda policy, ``"cpu"`` the torch-cpu one) makes every engine op look up
its aten name in the policy (:mod:`ampref.policy.policies`) and cast its eligible inputs as
torch's autocast does (specs/autocast.md, AUT-*):

* ``lower_precision_fp``: eligible inputs -> the autocast format (fp32 leaf weights
  that require grad are cast once per region and cached, AUT-CAC-*);
* ``fp32``: eligible fp16/bf16 inputs -> float32;
* ``fp32_set_opt_dtype``: inputs untouched, the op outputs float32 (``dtype=float32``);
* ``promote``: all eligible inputs -> the widest of them (fp16 with bf16 raises);
* ``banned``: raises with torch's advice;
* unlisted ops run on their inputs with ordinary promotion.

Autocast decides, ops apply: :func:`plan` returns a :class:`CastPlan` (target format per
input, whether the weight-cast cache may serve, a forced output format, listed or not);
the op layer (:mod:`ampref.engine.functional`) performs the casts and owns the cache, keyed by
the outermost region (:func:`cache_region`), so the cache ends with that region.

Eligible means floating and not float64 (AUT-ELI-001). Regions nest: the inner one
overrides and the outer state is restored on exit. The state is per thread/context
(``contextvars``), never a process-global flag. Outputs are never cast back on exit.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from ampref.common.checks import check_flag
from ampref.common.reusable import ReusableContext
from ampref.formats.table import Format, get_format
from .policies import MixedPolicy, Policy, get_policy, load_policy

__all__ = ["DEVICE_POLICIES", "CastPlan", "Region", "active", "autocast", "cache_region",
           "plan", "suspended"]

F32 = get_format("float32")

#: torch's device types and the shipped policy that reproduces each one's op lists
DEVICE_POLICIES = {"cuda": "torch-cuda", "cpu": "torch-cpu"}


class Region:
    """Identity of an outermost autocast region (the weight-cast cache's key)."""

    __slots__ = ("__weakref__",)


@dataclass(frozen=True, kw_only=True)
class _State:
    enabled: bool
    dtype: Format | None
    policy: Policy | MixedPolicy | None
    cache_enabled: bool
    region: Region | None = None
    suspended: bool = False  # inside a listed op: nested ops are not re-cast


_OFF = _State(enabled=False, dtype=None, policy=None, cache_enabled=True)
_STATE: contextvars.ContextVar[_State] = contextvars.ContextVar(
    "ampref_autocast", default=_OFF)  # noqa: B039 - frozen


@dataclass(frozen=True, kw_only=True)
class CastPlan:
    """What the active policy decides for one op call.

    Attributes:
        targets: per input, the format to cast it to, or None to leave it.
        cacheable: the casts may be served by the region's weight-cast cache.
        output: a forced output format (``fp32_set_opt_dtype``), or None.
        listed: the op is in the policy: its nested ops run without re-casting.
    """

    targets: tuple[Format | None, ...]
    cacheable: bool = False
    output: Format | None = None
    listed: bool = False


def autocast(device_type: str, dtype: str | Format | None = None, enabled: bool = True,
             cache_enabled: bool = True, *,
             policy: str | Path | Policy | MixedPolicy | None = None) -> ReusableContext[None]:
    """Run engine ops inside under a precision policy (AUT-CTX-*), in torch's call shape.

    The arguments are checked when it is called; the object it returns can be entered
    again, nested in itself, or used as a decorator, as ``torch.autocast``'s.

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
    enabled = check_flag("autocast enabled", enabled)
    cache_enabled = check_flag("autocast cache_enabled", cache_enabled)
    pol = _policy_of(DEVICE_POLICIES[device_type] if policy is None else policy)
    if isinstance(pol, MixedPolicy):
        fmt = pol.compute if dtype is None else get_format(dtype)
    else:
        fmt = pol.default_dtype if dtype is None else get_format(dtype)
        if fmt.name not in ("float16", "bfloat16"):
            raise ValueError(f"autocast dtype must be float16 or bfloat16 under policy "
                             f"{pol.name!r}, got {fmt.name}")
    return ReusableContext(_region, _State(enabled=enabled, dtype=fmt, policy=pol,
                                           cache_enabled=cache_enabled))


def _policy_of(policy: str | Path | Policy | MixedPolicy) -> Policy | MixedPolicy:
    """A policy object, a jmp string (``"params=...,compute=..."``) or a name or path."""
    if isinstance(policy, (Policy, MixedPolicy)):
        return policy
    if isinstance(policy, str) and "=" in policy:
        return get_policy(policy)
    return load_policy(policy)


@contextmanager
def _region(state: _State) -> Iterator[None]:
    """One entry of an autocast region: ``state`` active inside, the outer one after."""
    # the outermost region creates the cache identity; leaving it drops the cache (AUT-CAC-002)
    token = _STATE.set(replace(state, region=_STATE.get().region or Region()))
    try:
        yield
    finally:
        _STATE.reset(token)



@contextmanager
def suspended() -> Iterator[None]:
    """Nested ops of a listed op run without re-casting (torch excludes the key)."""
    state = _STATE.get()
    token = _STATE.set(state if state.suspended else _suspended(state))
    try:
        yield
    finally:
        _STATE.reset(token)


def active() -> tuple[Policy | MixedPolicy | None, Format | None]:
    """The policy and low-precision format of the innermost enabled region, or
    (None, None) outside autocast or inside ``enabled=False``."""
    st = _STATE.get()
    return (st.policy, st.dtype) if st.enabled else (None, None)


#: the last state suspended and its twin (suspension is entered once per emulated op;
#: holding the state keeps the identity check sound)
_LAST: list[tuple[_State, _State]] = []


def _suspended(state: _State) -> _State:
    """The suspended twin of a state, made once per state (one atomic read of the pair,
    so threads never mix one state's twin with another's)."""
    pair = _LAST[0] if _LAST else None
    if pair is None or pair[0] is not state:
        pair = (state, replace(state, suspended=True))
        _LAST[:] = [pair]
    return pair[1]


def cache_region() -> Region | None:
    """The outermost region whose weight-cast cache may serve casts now, or None
    (outside autocast, or ``cache_enabled=False``)."""
    st = _STATE.get()
    return st.region if st.cache_enabled else None


def _eligible(fmt: Format) -> bool:
    return fmt.kernel  # every format but the storage-only float64


def _to(fmts: Sequence[Format], target: Format) -> tuple[Format | None, ...]:
    return tuple(target if f != target and _eligible(f) else None for f in fmts)


def _prioritize(start: Format, fmts: list[Format], op: str) -> Format:
    """torch's at::autocast::prioritize folded over the eligible inputs (AUT-CAT-004)."""
    current = start
    for nxt in fmts:
        if current == F32 or nxt == F32:
            current = F32
        elif current != nxt:
            raise TypeError("Unexpected floating ScalarType in at::autocast::prioritize: "
                            f"op {op!r} "
                            f"mixes {current.name} and {nxt.name} under {start.name} autocast "
                            "(torch refuses to promote between float16 and bfloat16)")
    return current


def plan(op: str, formats: Sequence[Format]) -> CastPlan:
    """What the active policy does to op's inputs of these formats (AUT-CAT-*).

    Raises:
        RuntimeError: the op is banned under the policy (torch's advice in the message).
        TypeError: a promote op mixing float16 and bfloat16.
    """
    st = _STATE.get()
    leave = CastPlan(targets=(None,) * len(formats))
    if not st.enabled or st.policy is None or st.suspended or st.dtype is None:
        return leave
    if isinstance(st.policy, MixedPolicy):
        return CastPlan(targets=_to(formats, st.dtype), cacheable=True, listed=True)
    cat = st.policy.category(op)
    if cat is None:
        return leave
    if cat == "banned":
        advice = st.policy.advice.get(op, "")
        raise RuntimeError(f"{op} is banned under autocast policy {st.policy.name!r}. {advice}")
    if cat == "lower_precision_fp":
        return CastPlan(targets=_to(formats, st.dtype), cacheable=True, listed=True)
    if cat == "fp32":
        return CastPlan(targets=_to(formats, F32), listed=True)
    if cat in ("fp32_set_opt_dtype", "fp32_append_dtype"):
        first_ok = bool(formats) and _eligible(formats[0])
        return CastPlan(targets=(None,) * len(formats), output=F32 if first_ok else None,
                        listed=True)
    # promote: start at the autocast dtype, any fp32 -> fp32, fp16 with bf16 raises
    target = _prioritize(st.dtype, [f for f in formats if _eligible(f)], op)
    return CastPlan(targets=_to(formats, target), listed=True)
