"""Autocast rules of ops outside aten (torchvision's, a user's own custom ops), as data.

Why: :func:`ampref.torch.autocast` with ``device_type="cuda"`` runs torch's CUDA lists on
CPU tensors, which dispatch through ``AutocastCPU``. For aten ops ampref registers its
kernels there (TRC-AUT-001); an op outside aten keeps whatever its library registered:
on a real GPU torch runs the op's ``AutocastCUDA`` kernel, here its ``AutocastCPU``
kernel would run, or nothing. torchvision registers ``roi_pool``, ``ps_roi_align``,
``ps_roi_pool`` and ``deform_conv2d`` for CUDA only: without :class:`OutsideCastMode`
they ran in float16 where CUDA autocast runs them in float32, silently (TRC-AUT-005).

A rule (:class:`OpCast`) says what the device's autocast kernel does: cast every
eligible input (a floating tensor on the device, not float64: torch's ``cached_cast``
and ``torch.library``'s ``_cast`` agree) to ``cast_to``, run the op below the key, and
optionally cast every tensor output to the first argument's dtype (torchvision's
``.to(input.scalar_type())``). Rules come, first found wins, from
:func:`register_autocast` (the user's declaration), from torch's own record of a
``torch.library.custom_op``'s ``register_autocast``, and from :data:`SHIPPED`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ampref.policy.autocast import DEVICE_POLICIES, active

from .base import UnsupportedOpError
from .emulated import device_autocast_off

__all__ = ["OpCast", "OutsideCastMode", "SHIPPED", "UnknownCastRuleError",
           "outside_ops", "register_autocast", "rule"]


class UnknownCastRuleError(UnsupportedOpError):
    """An op outside aten that the emulated device's autocast casts by a rule ampref
    cannot read (a C++ kernel, or ``torch.library.register_autocast`` on an op that is not
    a ``custom_op``): declare it with :func:`register_autocast`."""


@dataclass(frozen=True, kw_only=True)
class OpCast:
    """One op's autocast kernel on one device type.

    Attributes:
        op: qualified name without overload (``"torchvision::roi_align"``); the rule
            serves every overload.
        device_type: the autocast device whose kernel this describes (``"cuda"``).
        cast_to: the dtype every eligible input is cast to.
        outputs_to_input_dtype: every tensor output is cast to the first argument's
            dtype before the cast (torchvision's kernels), integer outputs included.
        right_to_left: the last argument is cast first (aten's own wrappers as torch's
            GCC builds evaluate them, TRC-AUT-004); False: first argument first
            (``torch.library``'s Python kernels, and torchvision 0.29.1's binaries, whose
            casts were recorded in that order).
        source: where the rule was read.
    """

    op: str
    device_type: str
    cast_to: torch.dtype
    outputs_to_input_dtype: bool
    right_to_left: bool
    source: str


def _torchvision(name: str, outputs_back: bool) -> OpCast:
    return OpCast(op=f"torchvision::{name}", device_type="cuda", cast_to=torch.float32,
                  outputs_to_input_dtype=outputs_back, right_to_left=False,
                  source=f"pytorch/vision torchvision/csrc/ops/autocast/{name}_kernel.cpp "
                         f"(Autocast, device CUDA); dtypes of 0.29.1's binaries in "
                         f"tests/data/outside_autocast_cuda.json")


#: torchvision's CUDA autocast kernels: every floating input to float32, outputs back to
#: the input's dtype (nms returns int64 indices and casts nothing back)
SHIPPED: tuple[OpCast, ...] = (
    _torchvision("nms", False),
    _torchvision("roi_align", True),
    _torchvision("roi_pool", True),
    _torchvision("ps_roi_align", True),
    _torchvision("ps_roi_pool", True),
    _torchvision("deform_conv2d", True),
)

_LOCK = threading.Lock()
_DECLARED: dict[tuple[str, str], OpCast] = {}


def _qualname(op: Any) -> str:
    """``"ns::name"`` of an op given as a string, an OpOverload(Packet) or a custom op."""
    if isinstance(op, str):
        ns, sep, name = op.partition("::")
        if not sep or not ns or not name or "." in name:
            raise ValueError(f"register_autocast: op must be 'namespace::name' (no overload), "
                             f"got {op!r}")
        return op
    # a custom op, an OpOverloadPacket, an OpOverload (whose _name carries the overload)
    for attr in ("_qualname", "_qualified_op_name", "_name"):
        q = getattr(op, attr, None)
        if isinstance(q, str) and "::" in q:
            return q.partition(".")[0]
    raise TypeError(f"register_autocast: op must be a 'namespace::name' string, an op from "
                    f"torch.ops or a torch.library.custom_op, got {type(op).__name__}")


def register_autocast(op: Any, device_type: str, cast_inputs: torch.dtype, *,
                      outputs_to_input_dtype: bool = False) -> OpCast:
    """Declare how ``device_type``'s autocast casts ``op`` (torch's
    ``torch.library.register_autocast`` call shape), for :func:`ampref.torch.autocast`
    regions that emulate that device on CPU tensors. ``outputs_to_input_dtype``: the
    kernel casts its outputs back to its first argument's dtype (a C++ kernel written as
    torchvision's). A later declaration replaces an earlier one. Registers nothing with
    torch: on the device itself torch's registration decides.

    Raises:
        ValueError: op not ``'namespace::name'``, or in aten (ampref's policies rule
            aten); device type not one ampref emulates (choices named).
        TypeError: op of another kind, cast_inputs not a floating torch dtype, a flag
            that is not a bool.
    """
    name = _qualname(op)
    if name.startswith("aten::"):
        raise ValueError(f"register_autocast: {name} is an aten op; its casts are the "
                         f"policy's (pass policy= to ampref.torch.autocast)")
    if device_type not in DEVICE_POLICIES:
        raise ValueError(f"register_autocast: unknown device_type {device_type!r}; choose "
                         f"one of {sorted(DEVICE_POLICIES)}")
    if not isinstance(cast_inputs, torch.dtype) or not cast_inputs.is_floating_point:
        raise TypeError(f"register_autocast: cast_inputs must be a floating torch dtype "
                        f"(torch.float16, torch.bfloat16, torch.float32), got {cast_inputs!r}")
    if not isinstance(outputs_to_input_dtype, bool):
        raise TypeError(f"register_autocast: outputs_to_input_dtype must be a bool, got "
                        f"{outputs_to_input_dtype!r}")
    row = OpCast(op=name, device_type=device_type, cast_to=cast_inputs,
                 outputs_to_input_dtype=outputs_to_input_dtype, right_to_left=False,
                 source="ampref.torch.register_autocast")
    with _LOCK:
        _DECLARED[(name, device_type)] = row
    return row


def _custom_op_rule(name: str, device_type: str) -> OpCast | None:
    """torch's record of ``register_autocast`` on a ``torch.library.custom_op``."""
    from torch._library.custom_ops import OPDEFS

    opdef = OPDEFS.get(name)
    dtype = getattr(opdef, "_autocast_dtype", {}).get(device_type) if opdef else None
    if dtype is None:
        return None
    return OpCast(op=name, device_type=device_type, cast_to=dtype,
                  outputs_to_input_dtype=False, right_to_left=False,
                  source="torch.library.custom_op register_autocast")


def rule(name: str, device_type: str) -> OpCast | None:
    """The rule for op ``name`` (``"ns::op"``) on ``device_type``, or None if unknown."""
    with _LOCK:
        declared = _DECLARED.get((name, device_type))
    if declared is not None:
        return declared
    found = _custom_op_rule(name, device_type)
    if found is not None:
        return found
    return next((r for r in SHIPPED if r.op == name and r.device_type == device_type), None)


def _device_key(device_type: str) -> str:
    return "Autocast" + torch._C._dispatch_key_for_device(device_type)


def outside_ops(device_type: str) -> dict[str, bool]:
    """Every op overload outside aten (``"ns::name.overload"``) with an autocast kernel at
    ``AutocastCPU`` or at ``device_type``'s key, mapped to whether the device has one."""
    key = _device_key(device_type)
    out = {}
    for qual in torch._C._dispatch_get_all_op_names():
        if qual.startswith("aten::"):
            continue
        on_device = torch._C._dispatch_has_kernel_for_dispatch_key(qual, key)
        if on_device or torch._C._dispatch_has_kernel_for_dispatch_key(qual, "AutocastCPU"):
            out[qual] = on_device
    return out


def _eligible(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.is_floating_point() and \
        t.dtype != torch.float64 and t.device.type == "cpu"


def _cast(value: Any, dtype: torch.dtype) -> Any:
    if _eligible(value):
        return value.to(dtype)
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, dtype) for v in value)
    return value


def _apply(r: OpCast, op: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """Run ``op`` as ``r``'s kernel does (the caller excludes the autocast key)."""
    entries = [*enumerate(args), *kwargs.items()]
    order = reversed(entries) if r.right_to_left else iter(entries)
    cast = {key: _cast(v, r.cast_to) for key, v in order}
    out = op(*(cast[i] for i in range(len(args))), **{k: cast[k] for k in kwargs})
    first = args[0] if args else None
    if not (r.outputs_to_input_dtype and isinstance(first, torch.Tensor)):
        return out
    if isinstance(out, (list, tuple)):
        return type(out)(o.to(first.dtype) if isinstance(o, torch.Tensor) else o for o in out)
    return out.to(first.dtype) if isinstance(out, torch.Tensor) else out


def _op_name(func: Any) -> str | None:
    """``"ns::name"`` of an op from ``torch.ops`` (packet or overload), else None."""
    if isinstance(func, torch._ops.OpOverloadPacket):
        return str(func._qualified_op_name)
    if isinstance(func, torch._ops.OpOverload):
        return str(func.name()).partition(".")[0]
    return None


class OutsideCastMode(TorchFunctionMode):  # type: ignore[misc]
    """Applies ``device_type``'s autocast rules to calls of :func:`outside_ops` made
    while ``policy`` is the active autocast policy.

    Why a function mode and not kernels at ``AutocastCPU`` (as for aten): overriding a
    kernel that ``torch.library`` registered in Python leaves torch's per-(op, key)
    record of Python kernels pointing at the override after it is removed (measured with
    torch 2.13: the op then fails under any dispatch mode). A call is seen where Python
    makes it (``torch.ops``, a custom op, ``torchvision.ops``), as libraries call them.

    The op then runs with ``AutocastCPU`` excluded, as torch's autocast kernels run
    theirs; where the device registers no kernel (CUDA autocast falls through) it runs
    the same way without casts, so aten ops issued inside the op's own CPU kernel are
    not autocast (torch on the device would cast each: stated limit, exact for opaque
    kernels).
    """

    def __init__(self, device_type: str, policy: Any, keyset: Any) -> None:
        """``ops`` is read once: ops registered later in the region are not seen."""
        super().__init__()
        self.device_type, self.policy, self.keyset = device_type, policy, keyset
        self.ops = {q.partition(".")[0]: on for q, on in outside_ops(device_type).items()}

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        name = _op_name(func)
        on_device = self.ops.get(name) if name is not None else None
        if on_device is None or active()[0] is not self.policy:
            return func(*args, **kwargs)
        with torch._C._ExcludeDispatchKeyGuard(self.keyset):
            # no device kernel (CUDA falls through), or the device's autocast switched off
            # inside the region (torch.autocast(device, enabled=False), custom_fwd)
            if not on_device or device_autocast_off(self.device_type):
                return func(*args, **kwargs)
            r = rule(str(name), self.device_type)
            if r is None:
                raise UnknownCastRuleError(
                    f"torch's {self.device_type} autocast registers a kernel for {name} "
                    f"whose casts ampref cannot read; declare them with ampref.torch."
                    f"register_autocast({name!r}, {self.device_type!r}, <dtype>) (see "
                    f"torch.library.register_autocast)")
            return _apply(r, func, args, kwargs)
