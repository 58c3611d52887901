"""A CUDA AMP script's own calls inside ``emulate``: ``torch.autocast("cuda", ...)``,
``torch.amp.GradScaler("cuda")`` and their ``torch.cuda.amp`` spellings behave as on a GPU,
on CPU tensors (``specs/torch.md`` TRC-CUD-*).

Without a GPU torch switches both off at construction, with only a warning: the script
would then run in float32 without loss scaling, which is not what it says. While
:func:`intercepted` is active (``emulate`` holds it), an autocast made for ``"cuda"`` or
``"cpu"`` enters :func:`ampref.torch.autocast.autocast` with the same arguments (that
device type's op lists from ``specs/policies``), and a GradScaler made for ``"cuda"`` is
an enabled scaler on the CPU tensors (torch's one GradScaler class; its arithmetic ops,
``_amp_foreach_non_finite_check_and_unscale_`` and ``_amp_update_scale_``, are the
emulated ones). Objects made before the interception keep torch's own behaviour.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from .autocast import DEFAULT_DTYPE, autocast

__all__ = ["intercepted"]

_AUTOCAST = torch.amp.autocast_mode.autocast
_SCALER = torch.amp.grad_scaler.GradScaler
_ORIGINAL: dict[str, Any] = {"init": _AUTOCAST.__init__, "enter": _AUTOCAST.__enter__,
                             "exit": _AUTOCAST.__exit__, "scaler_init": _SCALER.__init__}
#: (class, method name, key in _ORIGINAL) of each patched method
_PATCHED = ((_AUTOCAST, "__init__", "init"), (_AUTOCAST, "__enter__", "enter"),
            (_AUTOCAST, "__exit__", "exit"), (_SCALER, "__init__", "scaler_init"))

#: nesting depth of intercepted regions (emulate inside emulate keeps one patch)
_DEPTH = [0]


def _autocast_init(self: Any, device_type: str, dtype: torch.dtype | None = None,
                   enabled: bool = True, cache_enabled: bool | None = None) -> None:
    if device_type not in DEFAULT_DTYPE:  # mps, xpu, ...: torch's own
        _ORIGINAL["init"](self, device_type, dtype, enabled, cache_enabled)
        return
    self.device = device_type
    self.fast_dtype = DEFAULT_DTYPE[device_type] if dtype is None else dtype
    self._enabled = enabled
    self._cache_enabled = torch.is_autocast_cache_enabled() if cache_enabled is None \
        else cache_enabled
    self.custom_backend_name = torch._C._get_privateuse1_backend_name()
    self._ampref = []  # the ampref regions this autocast object has entered


def _autocast_enter(self: Any) -> Any:
    if not hasattr(self, "_ampref"):
        return _ORIGINAL["enter"](self)
    region = autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled)
    region.__enter__()
    self._ampref.append(region)
    return self


def _autocast_exit(self: Any, *exc: Any) -> Any:
    if not hasattr(self, "_ampref"):
        return _ORIGINAL["exit"](self, *exc)
    self._ampref.pop().__exit__(*exc)
    return False


def _scaler_init(self: Any, device: str = "cuda", *args: Any, **kwargs: Any) -> None:
    # the scaler's state tensors live with the CPU tensors they scale
    _ORIGINAL["scaler_init"](self, "cpu" if device == "cuda" else device, *args, **kwargs)


@contextmanager
def intercepted() -> Iterator[None]:
    """torch.autocast and GradScaler made inside act as on a GPU (see the module)."""
    ours = {"init": _autocast_init, "enter": _autocast_enter, "exit": _autocast_exit,
            "scaler_init": _scaler_init}
    if _DEPTH[0] == 0:
        for cls, name, key in _PATCHED:
            setattr(cls, name, ours[key])
    _DEPTH[0] += 1
    try:
        yield
    finally:
        _DEPTH[0] -= 1
        if _DEPTH[0] == 0:
            for cls, name, key in _PATCHED:
                setattr(cls, name, _ORIGINAL[key])
