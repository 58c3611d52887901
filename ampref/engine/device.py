"""Devices as torch scripts name them (ENG-DEV-001): ``ampref.device("cuda")``,
``x.to(device)``, ``model.to(device)``, ``ampref.cuda.is_available()``.

A device is where a tensor's array lives, which in ampref is its backend: ``cpu`` is the
NumPy backend, ``cuda`` the CuPy backend (one GPU, index 0). The table below is the one
place that says so. Moving a tensor copies its values exactly (no rounding); numerics do
not depend on the device (BKD-ENG-001).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ampref import backends  # type: ignore[attr-defined]  # mapped from backends/ (pyproject)

__all__ = ["DEVICE_KINDS", "DeviceKind", "backend_for", "device", "device_count", "device_of",
           "is_available"]


@dataclass(frozen=True, kw_only=True)
class DeviceKind:
    """A device type: torch's name for it and the backend that holds its arrays."""

    type: str
    backend: str
    #: device indices this backend can address (CuPy's current device only)
    indices: int


#: device type -> where its arrays live
DEVICE_KINDS: dict[str, DeviceKind] = {
    "cpu": DeviceKind(type="cpu", backend="numpy", indices=1),
    "cuda": DeviceKind(type="cuda", backend="cupy", indices=1),
}


class device:  # noqa: N801 - torch's name
    """``device("cpu")``, ``device("cuda")``, ``device("cuda:0")``, ``device("cuda", 0)``
    or a device itself. Equal devices compare equal and hash alike; ``str`` gives torch's
    spelling.

    Raises:
        TypeError: ``type`` is not a str or device, ``index`` not an int.
        ValueError: an unknown type (the choices named) or an index this build cannot
            address (CPU has no index; CUDA index 0 only).
    """

    __slots__ = ("index", "type")
    type: str
    index: int | None

    def __init__(self, type: str | device, index: int | None = None) -> None:
        spec: Any = type
        if isinstance(spec, device):
            spec, index = spec.type, spec.index if index is None else index
        if not isinstance(spec, str):
            raise TypeError(f"device must be a str such as 'cpu' or 'cuda:0', or a device; "
                            f"got {builtin_type(spec).__name__}: {spec!r}")
        name, _, tail = spec.partition(":")
        if tail:
            if index is not None or not tail.isdigit():
                raise ValueError(f"invalid device string {spec!r}: expected 'cpu', 'cuda' or "
                                 f"'cuda:<index>'")
            index = int(tail)
        if name not in DEVICE_KINDS:
            raise ValueError(f"unknown device type {name!r}; choices: {', '.join(DEVICE_KINDS)}")
        if index is not None:
            _check_index(name, index)
        object.__setattr__(self, "type", name)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a device is immutable")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, device) and (self.type, self.index) == (other.type, other.index)

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self) -> str:
        index = "" if self.index is None else f", index={self.index}"
        return f"device(type={self.type!r}{index})"


builtin_type = type


def _check_index(name: str, index: Any) -> None:
    if isinstance(index, bool) or not isinstance(index, int):
        raise TypeError(f"device index must be an int, got {builtin_type(index).__name__}")
    if not 0 <= index < DEVICE_KINDS[name].indices:
        raise ValueError(f"device {name}:{index} cannot be addressed: ampref's {name} backend "
                         f"uses index 0 only")


def device_of(backend: Any) -> device:
    """The device a backend's arrays live on (a backend not in the table: cuda, as the
    device backends registered for testing are)."""
    for kind in DEVICE_KINDS.values():
        if kind.backend == getattr(backend, "name", None):
            return device(kind.type, None if kind.type == "cpu" else 0)
    return device("cuda", 0)


def backend_for(where: str | device) -> Any:
    """The backend holding ``where``'s arrays.

    Raises:
        TypeError, ValueError: not a device (see :class:`device`), or a device whose
            backend is not available here (CUDA without CuPy or a GPU: the reason named).
    """
    d = device(where)
    kind = DEVICE_KINDS[d.type]
    try:
        return backends.get(kind.backend)
    except ValueError as e:
        raise ValueError(f"device {str(d)!r} needs ampref's {kind.backend} backend, which is "
                         f"not available here ({e}); ampref.cuda.is_available() says whether "
                         f"it is") from None


def is_available() -> bool:
    """True where the CUDA device's backend works (CuPy importable, a GPU present)."""
    return bool(backends.available(DEVICE_KINDS["cuda"].backend))


def device_count() -> int:
    """1 where CUDA is available (ampref uses the current GPU only), else 0."""
    return 1 if is_available() else 0
