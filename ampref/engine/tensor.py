"""The engine's tensor: exact values of a format, a gradient, and the graph (ENG-TEN-*).

A :class:`Tensor` holds a backend array whose every element is a value of its
:class:`~ampref.formats.table.Format` (float32 storage for formats up to 32 bits, float64
storage for float64). Ops (:mod:`ampref.engine.functional`) record a :class:`Node` with the
op's derivative; :meth:`Tensor.backward` walks the graph iteratively in a fixed
reverse-topological order, rounds every gradient contribution to the format of the
tensor it flows into (the dtype recorded in forward, ENG-BWD-002) and accumulates
contributions in that format in a fixed order (ENG-BWD-003).

Size (about 400 lines): the Tensor class, its one-line operator hooks and the backward.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ampref import backends  # type: ignore[attr-defined]  # mapped from backends/ (pyproject)

from ampref.common.checks import real_array, same_shape
from ampref.formats.table import FORMATS, Format

from . import floatstores, methods, ordermethods, viewmethods
from .gradmode import current_observer, is_grad_enabled, no_grad, observe_gradients

__all__ = ["Node", "Tensor", "is_grad_enabled", "no_grad", "observe_gradients", "round_to",
           "storage_dtype"]

FLOAT32 = FORMATS["float32"]

Backward = Callable[[Any], Sequence[Any]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Node:
    """One recorded op: its name, inputs and the map grad_out -> grads of the inputs."""

    op: str
    parents: tuple[Tensor, ...]
    backward: Backward


def storage_dtype(fmt: Format) -> Any:
    """float64 for the float64 format, float32 for every narrower format."""
    return np.float64 if fmt.wide else np.float32


def round_to(be: backends.Backend, values: Any, fmt: Format) -> Any:
    """Round computed values to ``fmt`` the engine's way (ENG-RND-001).

    float64 values are first rounded to float32 (nearest-even), then to ``fmt``: ops are
    defined as "compute in float32, round once to the output format" (the ml_dtypes and
    torch-CPU convention). float64 targets keep float64 values. NaN stays NaN; overflow
    goes to ±inf (fp16/bf16) as :func:`ampref.quantize` specifies; subnormals are kept.
    """
    xp = be.xp
    if fmt.wide:
        return xp.asarray(values, dtype=xp.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        v32 = xp.asarray(values, dtype=xp.float32)
    if fmt == FLOAT32:
        return v32
    return be.quantize(v32, fmt)


class Tensor:
    """An array of exact ``format`` values with optional gradient and graph.

    Attributes:
        data: backend array (float32 storage, float64 for the float64 format).
        format: the :class:`Format` every element belongs to.
        grad: accumulated gradient array (same format, same storage) or None.
        requires_grad: leaf flag; non-leaf tensors require grad when an input does.
    """

    __slots__ = (
        "__weakref__",
        "_grad",
        "_retain",
        "backend",
        "data",
        "format",
        "grad_scale",
        "loss_scale",
        "name",
        "node",
        "requires_grad",
    )
    __array_priority__ = 1000  # numpy scalars defer to Tensor's operators

    def __init__(self, data: Any, fmt: Format, *, requires_grad: bool = False,
                 node: Node | None = None, backend: backends.Backend | None = None,
                 name: str | None = None) -> None:
        self.data = data
        self.format = fmt
        self._grad: Any = None
        #: the loss scale that ``grad`` is still multiplied by (None: unscaled); set by a
        #: backward from a scaled loss, cleared by unscaling or by ``grad = None``
        self.grad_scale: float | None = None
        #: on a loss multiplied by a loss scaler: that scale (backward marks the gradients)
        self.loss_scale: float | None = None
        self.requires_grad = requires_grad
        self.node = node
        self.backend = backend if backend is not None else backends.get("numpy")
        self.name = name
        self._retain = False

    @property
    def grad(self) -> Any:
        """Accumulated gradient (backend array in this tensor's format) or None."""
        return self._grad

    @grad.setter
    def grad(self, value: Any) -> None:
        self._grad = value
        if value is None:
            self.grad_scale = None

    # -- basic properties --------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.data.shape)

    @property
    def ndim(self) -> int:
        return int(self.data.ndim)

    @property
    def is_leaf(self) -> bool:
        return self.node is None

    def numpy(self) -> np.ndarray:
        """The exact values as a NumPy float32 (float64) array (a copy)."""
        return np.array(self.backend.to_numpy(self.data), copy=True)

    def item(self) -> float:
        """The value of a one-element tensor.

        Raises:
            ValueError: the tensor has more than one element (its shape named).
        """
        if self.numel() != 1:
            raise ValueError(f"item() needs a one-element tensor, got shape {self.shape}")
        return float(self.backend.to_numpy(self.data).reshape(-1)[0])

    def detach(self) -> Tensor:
        return Tensor(self.data, self.format, backend=self.backend, name=self.name)

    def retain_grad(self) -> Tensor:
        """Keep ``.grad`` on this non-leaf tensor after backward (for diagnostics)."""
        self._retain = True
        return self

    def __repr__(self) -> str:
        g = ", requires_grad=True" if self.requires_grad else ""
        values = np.array2string(self.numpy(), threshold=8)
        return f"ampref.Tensor({values}, format={self.format.name}{g})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    __float__, __int__, __bool__ = methods.as_float, methods.as_int, methods.as_bool

    # -- torch's methods for scripts (ampref.engine.methods: each one op or shape query) --
    size = methods.size
    numel = methods.numel
    dim = methods.dim
    dtype = property(methods.dtype)
    float = methods.float
    half = methods.half
    bfloat16 = methods.bfloat16
    double = methods.double
    view, view_as = viewmethods.view, viewmethods.view_as
    flatten = viewmethods.flatten
    unsqueeze, squeeze = viewmethods.unsqueeze, viewmethods.squeeze
    permute, t = viewmethods.permute, viewmethods.t
    T, mT = property(viewmethods.T), property(viewmethods.mT)
    expand, expand_as = viewmethods.expand, viewmethods.expand_as
    clone = methods.clone
    contiguous = methods.contiguous
    requires_grad_ = methods.requires_grad_
    sigmoid = methods.sigmoid
    sqrt, rsqrt = methods.sqrt, methods.rsqrt
    sin, cos, log1p, expm1 = methods.sin, methods.cos, methods.log1p, methods.expm1
    reciprocal = methods.reciprocal
    var, std = methods.var, methods.std
    sort, topk, gather = ordermethods.sort, ordermethods.topk, ordermethods.gather
    abs, clamp, clip, max, min = methods.abs, methods.clamp, methods.clamp, methods.max, \
        methods.min
    square, type_as = methods.square, methods.type_as
    isnan, isinf, isfinite = methods.isnan, methods.isinf, methods.isfinite
    softmax = methods.softmax
    log_softmax = methods.log_softmax
    pow = methods.pow
    masked_fill = methods.masked_fill
    argmax = methods.argmax
    argmin = methods.argmin
    tolist = methods.tolist
    split = methods.split
    chunk = methods.chunk

    # -- autograd ------------------------------------------------------------------------
    def backward(self, grad: Any = None) -> None:
        """Accumulate d(self)/d(leaf) into every leaf's ``.grad`` (ENG-BWD-*).

        Args:
            grad: gradient of the output; defaults to 1 for a one-element tensor.

        Raises:
            RuntimeError: the tensor does not require grad, or ``grad`` is missing for a
                tensor of more than one element.
            TypeError / ValueError: ``grad`` not real, or not of the tensor's shape.
        """
        # why long: the engine's one backward loop: gradient rounding, accumulation, the
        # observer and the loss-scale marks act on the same per-tensor state
        if not self.requires_grad:
            raise RuntimeError("backward() on a tensor that does not require grad "
                               "(no input had requires_grad=True, or it was made under no_grad)")
        be = self.backend
        if grad is None:
            if self.numel() != 1:
                raise RuntimeError(f"grad can be implicit only for one-element outputs; "
                                   f"this one has shape {self.shape}")
            g0 = be.xp.ones(self.shape, dtype=storage_dtype(self.format))
        else:
            raw = grad.data if isinstance(grad, Tensor) else real_array("backward grad", grad)
            g0 = round_to(be, be.asarray(same_shape("backward grad", raw, self.shape)), self.format)
        order = _topological(self)
        observer = current_observer()
        scaled = self.loss_scale
        grads: dict[int, Any] = {id(self): g0}
        for t in order:  # outputs before inputs
            g = grads.pop(id(t), None)
            if g is None:
                continue
            if t.node is None or t._retain:
                if t.grad is None or scaled is not None:
                    mark = scaled
                else:
                    mark = t.grad_scale  # an unscaled contribution keeps an earlier mark
                t.grad = g if t.grad is None else round_to(t.backend, t.grad + g, t.format)
                t.grad_scale = mark
            if t.node is None:
                continue
            contributions = t.node.backward(g)
            for parent, pg in zip(t.node.parents, contributions, strict=True):
                if pg is None or not parent.requires_grad:
                    continue
                raw = pg
                # each gradient on its tensor's backend (a device move's node returns
                # its input's gradient to the input's backend, ENG-DEV-001)
                pg = round_to(parent.backend, pg, parent.format)
                if observer is not None and not parent.format.covers_float32:
                    observer(parent, raw, pg)
                if pg.shape != parent.shape:
                    raise RuntimeError(f"internal: op {t.node.op} gave a gradient of shape "
                                       f"{pg.shape} for an input of shape {parent.shape}")
                prev = grads.get(id(parent))
                with np.errstate(all="ignore"):  # inf - inf: NaN, as the format says
                    grads[id(parent)] = pg if prev is None else round_to(
                        parent.backend, prev + pg, parent.format)

    # -- operators (definitions in ampref.functional) ------------------------------------
    def __add__(self, o: Any) -> Tensor:
        return _F().add(self, o)

    def __radd__(self, o: Any) -> Tensor:
        return _F().add(o, self)

    def __sub__(self, o: Any) -> Tensor:
        return _F().sub(self, o)

    def __rsub__(self, o: Any) -> Tensor:
        return _F().sub(o, self)

    def __mul__(self, o: Any) -> Tensor:
        return _F().mul(self, o)

    def __rmul__(self, o: Any) -> Tensor:
        return _F().mul(o, self)

    def __truediv__(self, o: Any) -> Tensor:
        return _F().div(self, o)

    def __rtruediv__(self, o: Any) -> Tensor:
        return _F().div(o, self)

    def __neg__(self) -> Tensor:
        return _F().neg(self)

    def __pow__(self, o: Any) -> Tensor:
        return _F().pow(self, o)

    def __rpow__(self, o: Any) -> Tensor:
        return _F().pow(o, self)

    def __matmul__(self, o: Any) -> Tensor:
        return _F().matmul(self, o)

    def __rmatmul__(self, o: Any) -> Tensor:
        return _F().matmul(o, self)

    def __getitem__(self, idx: Any) -> Tensor:
        return _F().index(self, idx)

    # in-place writes (ENG-INP-001: a fresh array each time; refused while recording a
    # tensor that requires grad)
    __setitem__ = floatstores.setitem
    add_, sub_, mul_, div_ = floatstores.add_, floatstores.sub_, floatstores.mul_, \
        floatstores.div_
    __iadd__, __isub__, __imul__, __itruediv__ = floatstores.iadd, floatstores.isub, \
        floatstores.imul, floatstores.idiv
    clamp_, fill_, zero_, copy_ = floatstores.clamp_, floatstores.fill_, floatstores.zero_, \
        floatstores.copy_
    masked_fill_ = floatstores.masked_fill_

    # comparisons: elementwise bool IndexTensors, as torch's (ENG-INT-002); hashing by
    # identity, as torch's tensors hash
    __eq__, __ne__ = methods.eq, methods.ne  # type: ignore[assignment]
    __lt__, __le__, __gt__, __ge__ = methods.lt, methods.le, methods.gt, methods.ge
    eq, ne, lt, le, gt, ge = (methods.compare_method(n) for n in methods.COMPARISONS)
    __hash__ = object.__hash__

    def transpose(self, dim0: int, dim1: int) -> Tensor:
        return _F().transpose(self, dim0, dim1)

    def reshape(self, *shape: Any) -> Tensor:
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _F().reshape(self, shape)

    def sum(self, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:
        return _F().sum(self, dim, keepdim, dtype=dtype)

    def mean(self, dim: Any = None, keepdim: bool = False) -> Tensor:
        return _F().mean(self, dim, keepdim)

    def exp(self) -> Tensor:
        return _F().exp(self)

    def log(self) -> Tensor:
        return _F().log(self)

    def tanh(self) -> Tensor:
        return _F().tanh(self)

    def relu(self) -> Tensor:
        return _F().relu(self)

    # torch's placement (ENG-DEV-001): to(format | device | both | tensor), cpu(), cuda()
    to, cpu, cuda = methods.to, methods.cpu, methods.cuda
    device = property(methods.device)


def _F() -> Any:
    from . import functional

    return functional


def _topological(root: Tensor) -> list[Tensor]:
    """Tensors reachable from ``root`` that need grad, outputs first (iterative DFS)."""
    post: list[Tensor] = []
    seen: set[int] = set()
    stack: list[tuple[Tensor, bool]] = [(root, False)]
    while stack:
        t, done = stack.pop()
        if done:
            post.append(t)
            continue
        if id(t) in seen:
            continue
        seen.add(id(t))
        stack.append((t, True))
        if t.node is not None:
            for p in reversed(t.node.parents):
                if p.requires_grad and id(p) not in seen:
                    stack.append((p, False))
    post.reverse()
    return post


def __getattr__(name: str) -> Any:
    """``tensor`` moved to :mod:`ampref.engine.creation` (it makes integer tensors too);
    ``from ampref.engine.tensor import tensor`` and the 0.1 path ``ampref.tensor.tensor``
    keep working through this lazy lookup."""
    if name == "tensor":
        from .creation import tensor  # an upward hook: creation builds on this module

        return tensor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
