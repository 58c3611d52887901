"""A strict stand-in for CuPy on the host: NumPy behind a wall.

Arrays of this module (:class:`DeviceArray`) refuse what CuPy arrays refuse: implicit
conversion to NumPy (``np.asarray(x)``, ``np.float32(x)``, NumPy ufuncs and functions
called on them). Only the module's own functions (``strictxp.sum``, ...), the array's
methods and operators, and the explicit ``asnumpy`` work. Running the engine on a
backend whose ``xp`` is this module finds every place where engine code would hand a
device array to NumPy, without a GPU. What it cannot find: functions NumPy has and CuPy
lacks, and CuPy's own numerics (those need a device; tests/test_cupy_backend.py).
"""

from __future__ import annotations

import operator
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np


class ImplicitHostTransfer(TypeError):
    """A device array reached NumPy without an explicit ``asnumpy``."""


def _unwrap(v: Any) -> Any:
    if isinstance(v, DeviceArray):
        return v._a
    if isinstance(v, tuple):
        return tuple(_unwrap(x) for x in v)
    if isinstance(v, list):
        return [_unwrap(x) for x in v]
    if isinstance(v, dict):
        return {k: _unwrap(x) for k, x in v.items()}
    return v


def _wrap(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return DeviceArray(v)
    if isinstance(v, np.generic) and not isinstance(v, (np.dtype,)):
        return DeviceArray(np.asarray(v))  # CuPy reductions give 0-d arrays, not scalars
    if isinstance(v, tuple):
        return tuple(_wrap(x) for x in v)
    if isinstance(v, list):
        return [_wrap(x) for x in v]
    return v


class DeviceArray:
    """A NumPy array that only this module may touch."""

    __slots__ = ("_a",)
    __array_priority__ = 1000

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    # NumPy must not see the data implicitly
    def __array__(self, *args: Any, **kwargs: Any) -> Any:
        raise ImplicitHostTransfer("implicit conversion of a device array to NumPy; use "
                                   "backend.to_numpy / xp.asnumpy")

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        # CuPy takes NumPy *scalars* beside its arrays (np.float32(2) * x); arrays are refused
        if method == "__call__" and not kwargs and all(
                isinstance(v, (DeviceArray, int, float, bool, np.generic)) for v in inputs):
            return _wrap(ufunc(*_unwrap(inputs)))
        raise ImplicitHostTransfer(f"NumPy ufunc {ufunc.__name__} called on a device array "
                                   "with a host array")

    def __array_function__(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        raise ImplicitHostTransfer(f"numpy.{func.__name__} called on a device array")

    # attributes and methods forward to the wrapped array
    @property
    def shape(self) -> tuple[int, ...]:
        return self._a.shape

    @property
    def dtype(self) -> Any:
        return self._a.dtype

    @property
    def ndim(self) -> int:
        return self._a.ndim

    @property
    def size(self) -> int:
        return self._a.size

    @property
    def T(self) -> DeviceArray:
        return DeviceArray(self._a.T)

    @property
    def flags(self) -> Any:
        return self._a.flags

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            # no __array_interface__, __array_struct__, __dlpack__ ...: NumPy must not
            # find a way to the data behind the wall
            raise AttributeError(name)
        attr = getattr(self._a, name)
        if not callable(attr):
            return _wrap(attr)

        def method(*args: Any, **kwargs: Any) -> Any:
            return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
        return method

    def __getitem__(self, key: Any) -> Any:
        return _wrap(self._a[_unwrap(key)])

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, np.ndarray) and value.ndim:
            raise ImplicitHostTransfer("assigning a NumPy array into a device array; "
                                       "use xp.asarray first")
        self._a[_unwrap(key)] = _unwrap(value)

    def __len__(self) -> int:
        return len(self._a)

    def __iter__(self) -> Any:
        return (_wrap(x) for x in self._a)

    # explicit scalar conversions are allowed (CuPy syncs and allows them)
    def __float__(self) -> float:
        return float(self._a)

    def __int__(self) -> int:
        return int(self._a)

    def __bool__(self) -> bool:
        return bool(self._a)

    def __index__(self) -> int:
        return operator.index(self._a)

    def __repr__(self) -> str:
        return f"DeviceArray({self._a!r})"


def _binary(op: Any) -> Any:
    def f(self: DeviceArray, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            raise ImplicitHostTransfer(f"{op.__name__} between a device and a NumPy array")
        return _wrap(op(self._a, _unwrap(other)))
    return f


def _rbinary(op: Any) -> Any:
    def f(self: DeviceArray, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            raise ImplicitHostTransfer(f"{op.__name__} between a NumPy and a device array")
        return _wrap(op(_unwrap(other), self._a))
    return f


def _inplace(op: Any) -> Any:
    def f(self: DeviceArray, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            raise ImplicitHostTransfer(f"{op.__name__} between a device and a NumPy array")
        self._a = op(self._a, _unwrap(other))
        return self
    return f


for _name, _op in (("add", operator.add), ("sub", operator.sub), ("mul", operator.mul),
                   ("truediv", operator.truediv), ("floordiv", operator.floordiv),
                   ("mod", operator.mod), ("pow", operator.pow), ("matmul", operator.matmul),
                   ("and", operator.and_), ("or", operator.or_), ("xor", operator.xor),
                   ("lshift", operator.lshift), ("rshift", operator.rshift)):
    setattr(DeviceArray, f"__{_name}__", _binary(_op))
    setattr(DeviceArray, f"__r{_name}__", _rbinary(_op))
    setattr(DeviceArray, f"__i{_name}__", _inplace(getattr(operator, f"i{_name}")))
for _name, _op in (("lt", operator.lt), ("le", operator.le), ("gt", operator.gt),
                   ("ge", operator.ge), ("eq", operator.eq), ("ne", operator.ne)):
    setattr(DeviceArray, f"__{_name}__", _binary(_op))
def _unary(op: Any) -> Any:
    def f(self: DeviceArray) -> Any:
        return _wrap(op(self._a))
    return f


_UNARY_OPS: tuple[tuple[str, Any], ...] = (
    ("neg", operator.neg), ("pos", operator.pos), ("abs", operator.abs),
    ("invert", operator.invert))
for _name, _uop in _UNARY_OPS:
    setattr(DeviceArray, f"__{_name}__", _unary(_uop))
DeviceArray.__hash__ = None  # type: ignore[assignment]


# ----------------------------------------------------------------------------- module
class _UFunc:
    """A NumPy ufunc seen through the wall (call, ``at``, ``reduce``, ``reduceat``)."""

    def __init__(self, uf: Any) -> None:
        self._uf = uf
        self.__name__ = uf.__name__

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _wrap(self._uf(*_unwrap(args), **_unwrap(kwargs)))

    def at(self, a: DeviceArray, indices: Any, b: Any = None) -> None:
        self._uf.at(a._a, _unwrap(indices), _unwrap(b))

    def reduce(self, *args: Any, **kwargs: Any) -> Any:
        return _wrap(self._uf.reduce(*_unwrap(args), **_unwrap(kwargs)))

    def reduceat(self, *args: Any, **kwargs: Any) -> Any:  # cupy.add.reduceat: CuPy >= 12
        return _wrap(self._uf.reduceat(*_unwrap(args), **_unwrap(kwargs)))


def asarray(x: Any, dtype: Any = None) -> DeviceArray:
    """Host -> device (explicit, as cupy.asarray)."""
    if isinstance(x, DeviceArray):
        return DeviceArray(np.asarray(x._a, dtype=dtype))
    return DeviceArray(np.array(_unwrap(x), dtype=dtype, copy=True))


def array(x: Any, dtype: Any = None, copy: bool = True) -> DeviceArray:
    return DeviceArray(np.array(_unwrap(x), dtype=dtype, copy=copy))


def asnumpy(x: Any) -> np.ndarray:
    """Device -> host (explicit, as cupy.asnumpy)."""
    return np.array(_unwrap(x), copy=True)


def ascontiguousarray(x: Any, dtype: Any = None) -> DeviceArray:
    return DeviceArray(np.ascontiguousarray(_unwrap(x), dtype=dtype))


def __getattr__(name: str) -> Any:
    """Every other NumPy name: functions unwrap their arguments and wrap their results;
    constants and dtypes pass through."""
    attr = getattr(np, name)
    if isinstance(attr, type) or not callable(attr):
        return attr
    if isinstance(attr, np.ufunc):
        return _UFunc(attr)

    def f(*args: Any, **kwargs: Any) -> Any:
        return _wrap(attr(*_unwrap(args), **_unwrap(kwargs)))
    f.__name__ = name
    return f


# ------------------------------------------------------------------ synchronisation hooks
#: functions whose output size depends on the data (``where`` with one argument): CuPy
#: reads that size back from the device before it can return
DATA_SIZED = frozenset({"unique", "nonzero", "flatnonzero", "argwhere", "compress",
                        "extract", "where"})


def _masked(key: Any) -> bool:
    keys = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, DeviceArray) and k._a.dtype == bool for k in keys)


def caller_site(skip: int = 1) -> str:
    """``path:line function`` of the innermost ampref frame (in ``ampref/`` or
    ``backends/``) below this frame and the ``skip`` frames that called it, not counting a
    backend's ``to_numpy`` (its caller is the site), else "?"."""
    for fr in reversed(traceback.extract_stack()[:-(skip + 1)]):
        path = fr.filename.replace("\\", "/")
        if ("/ampref/" in path or "/backends/" in path) and fr.name != "to_numpy":
            tail = path.split("/ampref/")[-1] if "/ampref/" in path else path.split("/")[-1]
            return f"{tail}:{fr.lineno} {fr.name}"
    return "?"


@contextmanager
def on_sync(hook: Callable[[str], None]) -> Iterator[None]:
    """Call ``hook(site)`` wherever CuPy would synchronise with the host while the block
    runs: an explicit ``asnumpy``, a scalar conversion (``int``, ``float``, ``bool``), and
    every operation whose output size depends on the data (boolean-mask indexing or
    assignment, :data:`DATA_SIZED`); ``site`` is the ampref frame that asked
    (:func:`caller_site`)."""
    g = globals()
    saved_asnumpy, saved_attr = g["asnumpy"], g["__getattr__"]
    saved = {n: DeviceArray.__dict__[n] for n in ("__float__", "__int__", "__bool__",
                                                   "__getitem__", "__setitem__")}

    def asnumpy_(x: Any) -> np.ndarray:
        hook(caller_site())
        return saved_asnumpy(x)

    def conv(name: str) -> Callable[..., Any]:
        def f(self: DeviceArray) -> Any:
            hook(caller_site())
            return saved[name](self)
        return f

    def getitem(self: DeviceArray, key: Any) -> Any:
        if _masked(key):
            hook(caller_site())
        return saved["__getitem__"](self, key)

    def setitem(self: DeviceArray, key: Any, value: Any) -> None:
        if _masked(key):
            hook(caller_site())
        saved["__setitem__"](self, key, value)

    def attr(name: str) -> Any:
        f = saved_attr(name)
        if name not in DATA_SIZED:
            return f

        def sized(*args: Any, **kwargs: Any) -> Any:
            if name != "where" or len(args) + len(kwargs) == 1:
                hook(caller_site())
            return f(*args, **kwargs)
        return sized

    g["asnumpy"], g["__getattr__"] = asnumpy_, attr
    for n in ("__float__", "__int__", "__bool__"):
        setattr(DeviceArray, n, conv(n))
    DeviceArray.__getitem__ = getitem  # type: ignore[method-assign]
    DeviceArray.__setitem__ = setitem  # type: ignore[method-assign]
    try:
        yield
    finally:
        g["asnumpy"], g["__getattr__"] = saved_asnumpy, saved_attr
        for n, f in saved.items():
            setattr(DeviceArray, n, f)
