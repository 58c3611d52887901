"""``ampref.torch.autocast``: ampref's autocast policies applied where torch's own autocast
applies them: per aten op, at the dispatcher's autocast key (``specs/torch.md``
TRC-AUT-*), so a CUDA AMP loop's casts happen on CPU tensors, inside composites too.

Why the dispatcher and not a Python mode: torch casts at the ``AutocastCPU`` /
``AutocastCUDA`` dispatch keys, which sit above autograd; a composite op without an
autocast kernel of its own (``cross_entropy_loss`` on CUDA, ``multi_head_attention_forward``
and the ops inside ``nn.TransformerEncoderLayer``) falls through that key and its inner
aten ops dispatch through it again, one by one. A ``TorchFunctionMode`` sees only the
outermost Python call, and a ``TorchDispatchMode`` sits below autograd (its casts would
not be in the graph). So each region registers, with ``torch.library``, a Python kernel
at ``AutocastCPU`` for every op its policy lists and every op torch itself registers
there (those it does not list then run uncast, as the policy says); the kernel excludes
the key, casts as the policy's :func:`ampref.policy.autocast.plan` decides (casts made
with ``Tensor.to``, so autograd records them) and redispatches. Leaving the region
removes the registrations, which restores torch's own kernels. CPU tensors dispatch
through ``AutocastCPU`` whatever ``device_type`` names: ``device_type`` only picks the
op lists.

A :class:`~ampref.policy.policies.MixedPolicy` (a jmp string: every op computes in one
format) casts at the Python calls instead, as jmp casts at module boundaries.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch.library import Library

from ampref.common.reusable import ReusableContext
from ampref.formats.table import Format
from ampref.policy import autocast as policy_autocast
from ampref.policy.policies import MixedPolicy, Policy

from .convert import FLOAT_DTYPES, format_of
from .jmpmode import JmpMode
from .castargs import (
    APPEND_DTYPE,
    append_dtype_call,
    cast_order,
    leaves,
    replaced,
    with_float32_dtype,
)
from .emulated import device_autocast_off, emulating
from .outsidecasts import OutsideCastMode

__all__ = ["APPEND_DTYPE", "autocast", "casts_per_op", "overloads", "torch_registered"]

_KEY = torch._C.DispatchKey.AutocastCPU
_KEYSET = torch._C.DispatchKeySet(_KEY)

#: torch's default autocast dtype per device type (``torch.get_autocast_dtype``)
DEFAULT_DTYPE = {"cuda": torch.float16, "cpu": torch.bfloat16}


@cache
def torch_registered() -> frozenset[str]:
    """aten ops (``name.overload``, ``name`` for the default overload) that torch itself
    registers a kernel for at ``AutocastCPU``."""
    out = set()
    for qual in torch._C._dispatch_get_all_op_names():
        if qual.startswith("aten::") and \
                torch._C._dispatch_has_kernel_for_dispatch_key(qual, "AutocastCPU"):
            out.add(qual.removeprefix("aten::"))
    return frozenset(out)


def overloads(name: str) -> list[Any]:
    """The aten overloads a policy name stands for: ``softmax.int`` exactly that one; a
    bare name its default overload, or every overload where aten has no default
    (AUT-POL-002). Names aten does not know give none (a policy for another release)."""
    base, _, overload = name.partition(".")
    packet = getattr(torch.ops.aten, base, None)
    if packet is None:
        return []
    if overload:
        return [getattr(packet, overload)] if overload in packet.overloads() else []
    if "default" in packet.overloads():
        return [packet.default]
    return [getattr(packet, o) for o in packet.overloads()]


def _name(op: Any) -> str:
    base = op.overloadpacket.__name__
    return base if op._overloadname == "default" else f"{base}.{op._overloadname}"


def _eligible(t: Any) -> bool:
    """torch's is_eligible: a defined floating CPU tensor that is not float64."""
    return isinstance(t, torch.Tensor) and t.dtype in FLOAT_DTYPES and \
        t.dtype != torch.float64 and t.device.type == "cpu"


def _torch_dtype(fmt: Format) -> torch.dtype:
    for dt, name in FLOAT_DTYPES.items():
        if name == fmt.name:
            return dt
    raise ValueError(f"autocast format {fmt.name} has no torch dtype")


class _Region:
    """One region's registrations and its weight-cast cache (shared with nested regions,
    torch's cache lives until the outermost region ends)."""

    def __init__(self, device: str, lower: torch.dtype | None, cache_enabled: bool,
                 cache: dict[int, tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.device, self.lower, self.cache_enabled, self.cache = (device, lower, cache_enabled,
                                                                   cache)

    def cast(self, t: torch.Tensor, target: Format, cacheable: bool) -> torch.Tensor:
        """``t.to(target)``, served from the cache where torch's cached_cast would be."""
        dt = _torch_dtype(target)
        if cacheable and dt == self.lower and t.dtype == torch.float32 and t.requires_grad \
                and t.is_leaf and not t._is_view() and self.cache_enabled:
            hit = self.cache.get(id(t))
            if hit is None or hit[0] is not t:
                hit = (t, t.to(dt))
                self.cache[id(t)] = hit
            return hit[1]
        return t.to(dt)

    def apply(self, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Cast ``op``'s eligible inputs as the active policy decides, then run it below
        the autocast key (nested ops are not cast again, as in torch); an op the policy
        does not list falls through."""
        if device_autocast_off(self.device):
            # torch.autocast(device, enabled=False) inside the region (custom_fwd's too)
            # switched the emulated device's autocast off: no op is cast, as on the device
            with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
                return op(*args, **kwargs)
        name = _name(op)
        flat = [a for a in leaves(args, kwargs) if isinstance(a, torch.Tensor)
                and a.dtype.is_floating_point]
        fmts = [format_of(a.dtype) if a.dtype in FLOAT_DTYPES else None for a in flat]
        known = [f for f in fmts if f is not None]
        plan = policy_autocast.plan(name, known) if len(known) == len(fmts) else None
        if plan is None or not plan.listed:
            return _fall_through(op, args, kwargs)
        with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
            return self._cast_and_run(op, name, plan, flat, args, kwargs)

    def _cast_and_run(self, op: Any, name: str, plan: Any, flat: list[torch.Tensor],
                      args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        todo = {id(t): target for t, target in zip(flat, plan.targets, strict=True)
                if target is not None and _eligible(t)}
        # one cast per argument, as torch's cached_cast: a tensor passed twice (mm(x, x))
        # is cast twice unless the weight cache serves it
        casts: dict[tuple[Any, ...], torch.Tensor] = {}
        for where, t in cast_order(args, kwargs):
            if id(t) in todo:
                casts[where] = self.cast(t, todo[id(t)], plan.cacheable)
        args, kwargs = replaced(args, kwargs, casts)
        first = args[0] if args else None
        if plan.output is not None and _eligible(first):
            if name in APPEND_DTYPE:
                return append_dtype_call(op, name, args, kwargs)
            args, kwargs = with_float32_dtype(op, args, kwargs)
        return op(*args, **kwargs)


def _fall_through(op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run an op the policy does not list as if no autocast kernel were registered for
    it. A composite (CompositeImplicitAutograd) runs its decomposition with the autocast
    key still on, so the aten ops inside it (``cross_entropy_loss`` -> ``log_softmax``,
    ``nll_loss``) each meet the policy, as they would after torch's fall-through; an op
    with kernels of its own runs below the key (its forward issues no further ops)."""
    if _composite(op.name()):
        return op.decompose(*args, **kwargs)
    with torch._C._ExcludeDispatchKeyGuard(_KEYSET):
        return op(*args, **kwargs)


@cache
def _composite(qualname: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(qualname, "CompositeImplicitAutograd")


def _kernel(region: _Region, op: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return region.apply(op, args, kwargs)
    return kernel


def _register(region: _Region, policy: Policy) -> Library:
    """A Library with ``region``'s kernel at AutocastCPU for every op the policy lists
    and every op torch registers there."""
    lib = Library("aten", "IMPL")
    names = set(torch_registered()) | set(policy.categories)
    ops = {_name(op): op for n in sorted(names) for op in overloads(n)}
    with warnings.catch_warnings():
        # torch warns once that a registered kernel is overridden: that is the point
        warnings.simplefilter("ignore", UserWarning)
        for name, op in sorted(ops.items()):
            lib.impl(name, _kernel(region, op), "AutocastCPU")
    return lib


class _Local(threading.local):
    #: the weight-cast cache of this thread's outermost region (torch's is thread-local)
    cache: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None


_LOCAL = _Local()


@contextmanager
def _torch_state(device_type: str, dtype: torch.dtype | None, enabled: bool,
                 cache_enabled: bool) -> Iterator[None]:
    """torch's autocast state for the region: the CPU key on (it is what CPU tensors
    dispatch through), the named device's flag and dtype as torch.autocast sets them."""
    devices = ["cpu"] if device_type == "cpu" else ["cpu", device_type]
    prev = [(d, torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in devices]
    prev_cache = torch.is_autocast_cache_enabled()
    for d in devices:
        torch.set_autocast_enabled(d, enabled)
        if dtype is not None:
            torch.set_autocast_dtype(d, dtype)
    torch.autocast_increment_nesting()
    torch.set_autocast_cache_enabled(cache_enabled)
    try:
        yield
    finally:
        torch.autocast_decrement_nesting()
        for d, was, dt in prev:
            torch.set_autocast_enabled(d, was)
            torch.set_autocast_dtype(d, dt)
        torch.set_autocast_cache_enabled(prev_cache)


def casts_per_op() -> bool:
    """Whether this thread is inside an :func:`autocast` region whose kernels cast per
    aten op at ``AutocastCPU`` (enabled, a per-op policy; not a jmp string)."""
    pol, low = policy_autocast.active()
    return isinstance(pol, Policy) and low is not None


def autocast(device_type: str = "cuda", dtype: torch.dtype | None = None, enabled: bool = True,
             cache_enabled: bool = True, *,
             policy: str | Path | Policy | MixedPolicy | None = None) -> ReusableContext[None]:
    """torch's ``autocast`` call shape with ampref's policies, on tensors of any device.

    ``device_type`` picks the op lists (``"cuda"``: torch's CUDA lists, ``"cpu"``: its CPU
    lists); ``policy`` any other (a shipped name, a TOML path, a jmp string). Each aten
    op (composites' inner ops included) is cast as the policy says, as torch's
    dispatcher does; inside :func:`ampref.torch.emulate` the casts and the ops run on
    ampref's numerics. float64 tensors are never cast; outputs are not cast back. The
    arguments are checked when it is called; the object it returns can be entered again,
    nested in itself, or used as a decorator, as ``torch.autocast``'s.

    Raises:
        ValueError: unknown device type or policy, a dtype other than float16/bfloat16.
        TypeError: ``enabled``/``cache_enabled`` not bools, or a dtype that is not a torch
            floating dtype.
    """
    if dtype is not None and dtype not in FLOAT_DTYPES:
        raise TypeError(f"dtype must be a torch floating dtype (torch.float16, torch.bfloat16), "
                        f"got {dtype!r}")
    fmt = None if dtype is None else format_of(dtype)
    engine = policy_autocast.autocast(device_type, fmt, enabled, cache_enabled, policy=policy)
    return ReusableContext(_region, device_type, engine, enabled, cache_enabled)


@contextmanager
def _region(device_type: str, engine: ReusableContext[None], enabled: bool,
            cache_enabled: bool) -> Iterator[None]:
    """One entry of a bridge region: the engine's region (``engine``) and, for a per-op
    policy, its casts registered at torch's autocast keys."""
    with ExitStack() as stack:
        stack.enter_context(engine)
        pol, low = policy_autocast.active()
        if isinstance(pol, MixedPolicy):
            stack.enter_context(JmpMode())
            yield
            return
        if not isinstance(pol, Policy) or low is None:  # enabled=False: nothing is cast
            stack.enter_context(_torch_state(device_type, None, False, cache_enabled))
            yield
            return
        lower = _torch_dtype(low)
        if _LOCAL.cache is None:  # the outermost region: its cache ends with it
            _LOCAL.cache = {}
            stack.callback(setattr, _LOCAL, "cache", None)
        region = _Region(device_type, lower, cache_enabled, _LOCAL.cache)
        if device_type != "cpu":
            stack.enter_context(emulating(device_type))
        stack.enter_context(_torch_state(device_type, lower if lower in DEFAULT_DTYPE.values()
                                         else None, enabled, cache_enabled))
        lib = _register(region, pol)
        stack.callback(lib._destroy)
        outside = OutsideCastMode(device_type, pol, _KEYSET) if device_type != "cpu" else None
        if outside is not None and outside.ops:  # ops outside aten: the device's kernels
            stack.enter_context(outside)
        yield
