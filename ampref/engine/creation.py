"""Making tensors the way torch scripts do: ``tensor``, ``zeros``/``ones``/``full``/
``arange``, random ``rand``/``randn``/``randint`` and the global generator
(``manual_seed``) (ENG-RNG-002, ENG-INT-001).

Random tensors come from counter-based :class:`~ampref.engine.rng.Generator` streams: the
global one (``manual_seed(s)`` restarts it at seed ``s``, counter 0) or the ``generator=``
given. Layers built without ``seed=`` draw their initial weights from the global one, so
two ``nn.Linear(32, 32)`` start different and a script that calls ``manual_seed`` first is
reproducible on every backend. The numbers are not torch's (torch's CPU generator is a
Mersenne twister); the distribution is (uniform in [0, 1) on a 2^-24 grid; normal by
Box-Muller).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ampref import backends  # type: ignore[attr-defined]  # mapped from backends/ (pyproject)
from ampref.common.checks import check_flag
from ampref.formats.cast import exact_source
from ampref.formats.table import Format, get_format

from .indices import IndexTensor
from .placement import placed_backend
from .rng import Generator
from .tensor import Tensor

__all__ = ["INTEGER_DTYPES", "Generator", "arange", "default_generator", "full", "initial_seed",
           "manual_seed", "ones", "ones_like", "rand", "randint", "randn", "resolve_generator",
           "tensor", "zeros", "zeros_like"]

#: the global generator of ``manual_seed`` (torch's default CPU generator's role)
_DEFAULT = Generator(0)


def default_generator() -> Generator:
    """The global generator that ``manual_seed`` restarts and seedless layers draw from."""
    return _DEFAULT


def manual_seed(seed: int) -> Generator:
    """Restart the global generator at ``seed`` (an int in [0, 2^64)); returns it.

    Raises:
        TypeError, ValueError: ``seed`` is not an int in range (the value named).
    """
    return _DEFAULT.manual_seed(seed)


def initial_seed() -> int:
    return _DEFAULT.initial_seed()


#: names that ``tensor(..., format)`` reads as "keep the data integer" (torch's dtypes)
INTEGER_DTYPES = ("int64", "long", "int", "int32", "bool")


def tensor(data: Any, format: str | Format | None = None, requires_grad: bool = False,
           backend: str | Any = "numpy", *, dtype: str | Format | None = None,
           rounding: str = "nearest_even", name: str | None = None,
           device: Any = None) -> Any:
    """A leaf tensor holding ``data``: values of ``format`` rounded to it (nearest-even by
    default), or an integer tensor.

    ``device`` ("cpu", "cuda", an ``ampref.device``) places it as ``backend`` does
    (ENG-DEV-001). As torch's ``tensor``: without a format, integer data stays integer (an
    :class:`~ampref.engine.indices.IndexTensor` of int64, bool data of bool) and floating
    data becomes float32; ``format`` (or torch's keyword ``dtype``) ``"int64"``/``"long"``
    or ``"bool"`` asks for an integer tensor explicitly. NaN, ±inf, ±0 and subnormals
    follow :func:`ampref.quantize` (overflow: ±inf or saturation as the format's cast).

    Raises:
        ValueError: unknown format or backend (choices listed); ragged nested lists;
            both ``format`` and ``dtype``; an integer tensor that requires grad.
        TypeError: data is not numeric (complex, object, strings).
    """
    if format is not None and dtype is not None:
        raise ValueError(f"give format or dtype, not both (got {format!r} and {dtype!r})")
    if name is not None and not isinstance(name, str):
        raise TypeError(f"tensor: name must be a str or None, got {type(name).__name__}: "
                        f"{name!r}")
    want = format if format is not None else dtype
    be = backends.resolve(placed_backend(backend, device, "tensor"))
    arr = _numeric_array(be, data)
    integer = want is None and arr.dtype.kind in "iub"
    if integer or (isinstance(want, str) and want.lower() in INTEGER_DTYPES):
        return _integer_tensor(be, arr, want, requires_grad)
    fmt = get_format("float32" if want is None else want)
    wide = be.xp.asarray(arr, dtype=be.xp.float64)
    # one rounding from the exact (float64-held) input, never via float32 (FMT-RND-001)
    values = wide if fmt.wide else be.quantize(wide, fmt, rounding).astype(np.float32)
    return Tensor(values, fmt, requires_grad=check_flag("requires_grad", requires_grad),
                  backend=be, name=name)


def _numeric_array(be: backends.Backend, data: Any) -> Any:
    """``data`` as a backend array of a real numeric dtype, or a named error."""
    src = data.data if isinstance(data, (Tensor, IndexTensor)) else data
    if isinstance(src, np.ndarray) and src.dtype.kind == "f":
        src = exact_source(src)  # byte-swapped input in native order; longdouble only if exact
    try:
        arr = be.asarray(src)
    except ValueError as e:  # NumPy's "inhomogeneous shape" for ragged lists
        raise ValueError(f"tensor data must be a rectangular array of numbers, got ragged "
                         f"nested sequences ({e})") from None
    if arr.dtype.kind not in "fiub":
        raise TypeError(f"tensor data must be real numbers (float, int or bool), got dtype "
                        f"{arr.dtype}")
    return arr


def _integer_tensor(be: backends.Backend, arr: Any, want: Any,
                    requires_grad: Any) -> IndexTensor:
    if check_flag("requires_grad", requires_grad):
        raise ValueError("only floating-point tensors can require grad (torch: the same); "
                         "give a float format or drop requires_grad=True")
    if (want is None and arr.dtype.kind == "b") or str(want).lower() == "bool":
        return IndexTensor(arr.astype(bool), be)
    if arr.dtype.kind == "f":
        if not bool(be.xp.all(be.xp.trunc(arr) == arr)):
            raise ValueError("an int64 tensor needs integer values; got fractions, NaN or "
                             "inf (torch truncates; ampref refuses)")
    return IndexTensor(arr.astype(np.int64), be)


def _shape(size: tuple[Any, ...], what: str) -> tuple[int, ...]:
    """``f(2, 3)`` and ``f((2, 3))`` both mean shape (2, 3); each size an int >= 0."""
    dims = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else size
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0:
            raise ValueError(f"{what}: sizes must be ints >= 0, got {dims!r}")
    return tuple(int(d) for d in dims)


def _float(values: Any, fmt: Any, requires_grad: bool, backend: Any) -> Any:
    """``values`` as a tensor of ``fmt`` (float32 when None; an integer dtype gives an
    integer tensor, as ``torch.zeros(..., dtype=torch.long)`` does)."""
    return tensor(values, "float32" if fmt is None else fmt, requires_grad, backend)


def _random_float(values: Any, fmt: Any, requires_grad: bool, backend: Any,
                  what: str) -> Tensor:
    if isinstance(fmt, str) and fmt.lower() in INTEGER_DTYPES:
        raise ValueError(f"{what} draws floating-point values; dtype {fmt!r} is an integer "
                         f"type (use randint)")
    out: Tensor = _float(values, fmt, requires_grad, backend)
    return out


def resolve_generator(generator: Generator | None) -> Generator:
    """``generator``, or the global one when None (every ``generator=`` argument).

    Raises:
        TypeError: not an ampref Generator.
    """
    if generator is None:
        return _DEFAULT
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be an ampref Generator, got "
                        f"{type(generator).__name__}")
    return generator


def rand(*size: Any, generator: Generator | None = None, dtype: str | Format | None = None,
         requires_grad: bool = False, backend: str | Any = "numpy",
         device: Any = None) -> Tensor:
    """Uniform values in [0, 1) on the 2^-24 grid, then rounded to ``dtype`` (float32)."""
    u = resolve_generator(generator).uniform(_shape(size, "rand"))
    return _random_float(u, dtype, requires_grad, placed_backend(backend, device, "rand"),
                         "rand")


def randn(*size: Any, generator: Generator | None = None, dtype: str | Format | None = None,
          requires_grad: bool = False, backend: str | Any = "numpy",
          device: Any = None) -> Tensor:
    """Standard normal values (Box-Muller, float32), then rounded to ``dtype``."""
    z = resolve_generator(generator).normal(_shape(size, "randn"))
    return _random_float(z, dtype, requires_grad, placed_backend(backend, device, "randn"),
                         "randn")


def randint(low: int, high: int | Sequence[int] | None = None, size: Sequence[int] = (), *,
            generator: Generator | None = None, backend: str | Any = "numpy",
            device: Any = None) -> IndexTensor:
    """int64 values in [low, high) (``randint(high, size)``, with size by position or
    keyword, means low 0, as in torch).

    Raises:
        ValueError: ``high <= low`` or a bad size (values named).
    """
    top: Any = high
    if isinstance(top, (tuple, list)) and size == ():  # torch's randint(high, size)
        size, top = top, None
    if top is None:
        low, top = 0, low
    for name, v in (("low", low), ("high", top)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"randint: {name} must be an int, got {v!r}")
    if top <= low:
        raise ValueError(f"randint: high must be greater than low, got low={low}, "
                         f"high={top}")
    shape = _shape((size,), "randint")
    values = resolve_generator(generator).integers(int(top) - int(low), shape) + int(low)
    be = backends.resolve(placed_backend(backend, device, "randint"))
    return IndexTensor(be.asarray(values), be)


def full(size: Sequence[int], fill_value: float, *, dtype: str | Format | None = None,
         requires_grad: bool = False, backend: str | Any = "numpy", device: Any = None) -> Any:
    """Every element ``fill_value`` rounded once to ``dtype`` (float32; an int fill with
    no dtype gives an int64 tensor, as in torch)."""
    values = np.full(_shape((size,), "full"), fill_value)
    return tensor(values, dtype, requires_grad, placed_backend(backend, device, "full"))


def zeros(*size: Any, dtype: str | Format | None = None, requires_grad: bool = False,
          backend: str | Any = "numpy", device: Any = None) -> Any:
    return _float(np.zeros(_shape(size, "zeros")), dtype, requires_grad,
                  placed_backend(backend, device, "zeros"))


def ones(*size: Any, dtype: str | Format | None = None, requires_grad: bool = False,
         backend: str | Any = "numpy", device: Any = None) -> Any:
    return _float(np.ones(_shape(size, "ones")), dtype, requires_grad,
                  placed_backend(backend, device, "ones"))


def zeros_like(input: Tensor, *, dtype: str | Format | None = None,
               requires_grad: bool = False, device: Any = None) -> Any:
    x = _like_source(input, "zeros_like")
    return zeros(x.shape, dtype=dtype or x.format, requires_grad=requires_grad,
                 backend=x.backend if device is None else "numpy", device=device)


def ones_like(input: Tensor, *, dtype: str | Format | None = None,
              requires_grad: bool = False, device: Any = None) -> Any:
    x = _like_source(input, "ones_like")
    return ones(x.shape, dtype=dtype or x.format, requires_grad=requires_grad,
                backend=x.backend if device is None else "numpy", device=device)


def _like_source(input: Any, op: str) -> Tensor:
    if not isinstance(input, Tensor):
        raise TypeError(f"{op} expects an ampref.Tensor, got {type(input).__name__}")
    return input


def arange(start: float, end: float | None = None, step: float = 1, *,
           dtype: str | Format | None = None, requires_grad: bool = False,
           backend: str | Any = "numpy", device: Any = None) -> Any:
    """``start, start + step, ...`` below ``end`` (``arange(n)`` is 0..n-1): int64 when
    every argument is an int and no dtype is given, as in torch; else float values rounded
    once to ``dtype`` (float32). ``requires_grad`` as in :func:`tensor` (integer results
    cannot require a gradient)."""
    for name, v in (("start", start), ("end", end), ("step", step)):
        if v is None and name != "end":
            raise TypeError(f"arange: {name} must be a real number, got None")
        if v is not None and (isinstance(v, (bool, np.bool_)) or not isinstance(
                v, (int, float, np.integer, np.floating))):
            raise TypeError(f"arange: {name} must be a real number, got "
                            f"{type(v).__name__}: {v!r}")
        if v is not None and not np.isfinite(v):
            raise ValueError(f"arange: {name} must be finite, got {v!r}")
    if end is None:
        start, end = 0, start
    if step == 0:
        raise ValueError("arange: step must not be zero")
    return tensor(np.arange(start, end, step), dtype, requires_grad,
                  placed_backend(backend, device, "arange"))
