"""Array backends behind one small seam.

A backend bundles the array namespace (``xp``) with the few operations whose numerics
ampref defines itself: quantize-to-format, matmul under an accumulation model, sums
in a defined order (exactly rounded) and counter-based random bits. It is chosen
per call or per tensor, never through a global flag. ``get("numpy")`` always works;
``get("cupy")`` needs CuPy and a CUDA device.

Imports: ``ampref.common``, ``ampref.formats``, ``ampref.accumulation`` and
``ampref.scaling`` (the device loss-scaling kernels take its state rows); never the
engine, which reaches arrays only through this seam.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

__all__ = ["Backend", "DeviceScaling", "available", "backend_of", "get", "names", "register",
           "resolve"]

_MODULES = {"numpy": "ampref.backends.numpy_backend", "cupy": "ampref.backends.cupy_backend"}
_REGISTERED: dict[str, Any] = {}


class Backend(Protocol):
    """What the engine may ask of an array backend."""

    name: str
    xp: Any

    def asarray(self, x: Any, dtype: Any = None) -> Any: ...

    def to_numpy(self, x: Any) -> Any: ...

    def quantize(self, x: Any, fmt: Any, rounding: str = "nearest_even", *,
                 saturate: bool = False, subnormals: bool = True,
                 seed: int | None = None) -> Any: ...

    def random_bits(self, seed: int, start: int, count: int) -> Any: ...

    def matmul(self, a: Any, b: Any, accumulation: str = "exact",
               input_format: Any = None) -> Any:
        """float32 (..., M, K) @ (..., K, N) under an accumulation model; float64
        operands multiply in float64."""
        ...

    def sum(self, x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        """Sum in a defined order: float32 values give fl32(exact sum)."""
        ...

    def segment_sum(self, x: Any, starts: Any) -> Any:
        """Sums of consecutive row segments of ``x`` (n, D) starting at ``starts``:
        float32 values give fl32(exact sum) per segment, float64 values float64 sums."""
        ...

    def erfc(self, x: Any) -> Any:
        """The complementary error function of a float64 array, evaluated where the array
        lives (GELU as x erfc(-x/sqrt 2)/2: no cancellation for x < 0)."""
        ...


@runtime_checkable
class DeviceScaling(Protocol):
    """A backend that unscales gradients and updates the loss scale on its device, with
    one host read per step (BKD-SCL-*). The optimizer and ``GradScaler`` take this path
    for such backends' tensors."""

    def scaler_row(self, state: Any) -> Any: ...

    def unscale_(self, grads: list[Any], row: Any) -> None: ...

    def set_found(self, row: Any) -> None: ...

    def scaler_update(self, row: Any, config: Any) -> tuple[Any, bool, str]: ...

    def read_found(self, row: Any) -> bool: ...


def names() -> list[str]:
    return list(_MODULES) + [n for n in _REGISTERED if n not in _MODULES]


def register(name: str, backend: Any) -> None:
    """Make ``backend`` (an object with the :class:`Backend` methods) available as
    ``get(name)``, e.g. the CuPy backend's kernels run on the host for testing.

    Raises:
        ValueError: ``name`` is a built-in backend's name.
    """
    if name in _MODULES:
        raise ValueError(f"{name!r} is a built-in backend; register under another name")
    _REGISTERED[name] = backend


def get(name: str) -> Backend:
    """The backend called ``name`` ("numpy" or "cupy").

    Raises:
        ValueError: unknown name (choices listed) or backend unavailable here.
    """
    if name in _REGISTERED:
        return _REGISTERED[name]  # type: ignore[no-any-return]
    if name not in _MODULES:
        raise ValueError(f"unknown backend {name!r}; choose one of {', '.join(names())}")
    try:
        module = importlib.import_module(_MODULES[name])
    except ImportError as e:
        raise ValueError(f"backend {name!r} is not available here: {e}") from e
    return module.BACKEND  # type: ignore[no-any-return]


def resolve(backend: Any) -> Backend:
    """A backend from its name (:func:`get`) or a backend object itself (anything with
    the backend's ``name`` and ``xp``), as the ``backend=`` arguments take it.

    Raises:
        TypeError: neither a name nor a backend (the value and the names listed).
        ValueError: an unknown name.
    """
    if isinstance(backend, str):
        return get(backend)
    if isinstance(getattr(backend, "name", None), str) and hasattr(backend, "xp"):
        return backend  # type: ignore[no-any-return]
    raise TypeError(f"backend must be a backend name ({', '.join(names())}) or a backend "
                    f"object, got {type(backend).__name__}: {backend!r}")


def available(name: str) -> bool:
    """True if ``get(name)`` would succeed (CuPy: importable and a device present)."""
    try:
        backend = get(name)
    except ValueError:
        return False
    check = getattr(backend, "device_ok", None)
    return bool(check()) if callable(check) else True


def backend_of(*arrays: Any) -> Backend:
    """The single backend owning all array arguments (scalars and None ignored).

    Raises:
        TypeError: arrays from two backends are mixed (both named).
    """
    found: dict[str, Any] = {}
    for a in arrays:
        if a is None or isinstance(a, (int, float, bool)):
            continue
        mod = type(a).__module__.split(".")[0]
        found.setdefault("cupy" if mod == "cupy" else "numpy", type(a).__name__)
    if len(found) > 1:
        raise TypeError("arrays from different backends mixed: "
                        + " and ".join(f"{k} ({v})" for k, v in found.items()))
    return get(next(iter(found), "numpy"))
