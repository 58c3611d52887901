"""The emulated device's autocast state on this thread (``specs/torch.md`` TRC-AUT-006).

``ampref.torch.autocast("cuda")`` emulates CUDA autocast on CPU tensors. Code inside the
region may switch the device's autocast off the way it would on the device
(``torch.autocast("cuda", enabled=False)``, ``torch.amp.custom_fwd``); torch records that
in its per-device flag, which the region's kernels read here. Two details of torch make
this module necessary: inside a dispatch mode every autocast flag reads as off (the mode
runs with every key above it excluded), and ``custom_fwd`` casts only tensors that are on
its device.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import torch

__all__ = ["device_autocast_off", "emulating", "reopened"]


class _Thread(threading.local):
    #: the device whose autocast this thread's innermost region emulates on CPU tensors
    device: str | None = None
    #: inside a dispatch mode's own dispatch of a composite's parts (:func:`reopened`)
    reopened: bool = False


_THREAD = _Thread()


def device_autocast_off(device: str) -> bool:
    """Whether code inside an emulating region has switched ``device``'s autocast off.
    Never for ``"cpu"`` (its flag is the key the region's kernels sit at), and not while
    :func:`reopened` (the flags cannot be read inside a dispatch mode; inside ``emulate``
    every autocast object is ampref's, TRC-CUD-001, and its state is the policy
    context's)."""
    return device != "cpu" and not _THREAD.reopened and not torch.is_autocast_enabled(device)


@contextmanager
def emulating(device: str) -> Iterator[None]:
    """Mark this thread as emulating ``device``'s autocast, so that
    ``torch.amp.custom_fwd(device_type=device, cast_inputs=...)`` casts the CPU tensors
    that stand for that device's tensors; the previous mark is restored on exit."""
    _cast_hook()
    was, _THREAD.device = _THREAD.device, device
    try:
        yield
    finally:
        _THREAD.device = was


@cache
def _cast_hook() -> None:
    """Wrap torch's ``autocast_mode._cast`` once: ``custom_fwd`` casts only the tensors on
    its ``device_type`` (then runs the function with that device's autocast off); in a
    thread emulating that device the CPU tensors count as on it, elsewhere nothing
    changes."""
    mod = torch.amp.autocast_mode
    original = mod._cast

    def _cast(value: Any, device_type: str, dtype: torch.dtype) -> Any:
        if device_type == _THREAD.device:
            device_type = "cpu"
        return original(value, device_type, dtype)

    mod._cast = _cast


@contextmanager
def reopened() -> Iterator[None]:
    """``AutocastCPU`` un-excluded for a dispatch mode that dispatches a composite's parts
    itself (call it only inside a region that casts per op): a mode runs with every key
    above it excluded, but in torch a composite that reaches its backend kernel
    dispatches its parts afresh, through autocast."""
    key = torch._C.DispatchKey.AutocastCPU
    was, was_reopened = torch._C._dispatch_tls_is_dispatch_key_excluded(key), _THREAD.reopened
    torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
    _THREAD.reopened = True
    try:
        yield
    finally:
        _THREAD.reopened = was_reopened
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, was)
