"""Modules: parameters in a fixed order, state_dict, and the usual layers (ENG-NN-*).

Constructors follow ``torch.nn`` (names, order, defaults); ampref's own arguments
(``seed``, ``accumulation``, ``backend``) are keyword-only.

Parameters are float32 leaf tensors unless :meth:`Module.to_format` stores them in a
lower format (Apex O2 style; the optimizer then keeps float32 master copies).
Initialisation draws from :class:`ampref.engine.rng.Generator`, so a seed fixes every weight
on every backend.

The base class lives in :mod:`.base`, parameter-free layers and losses in
:mod:`.stateless`, containers in :mod:`.containers`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import functional as F
from ..functional.linalg import conv_pair
from ..functional.quantized import QuantState, quantized_linear
from ampref.accumulation.registry import resolve as resolve_accumulation
from ampref.common.checks import check_flag, check_real
from ampref.kernels.srhash import check_seed
from ..rng import Generator
from ..creation import default_generator
from ..tensor import Tensor
from .base import Module, Parameter

__all__ = [
    "GELU",
    "MLP",
    "Conv2d",
    "Dropout",
    "Embedding",
    "LayerNorm",
    "Linear",
    "Module",
    "MultiheadAttention",
    "Parameter",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "Tanh",
    "TransformerBlock",
]

Seed = int | Generator


def _gen(seed: Seed | None) -> Generator:
    """The layer's initialisation stream: a Generator as given, a fresh one at an int
    seed, or the global generator of ``ampref.manual_seed`` when no seed is given."""
    if seed is None:
        return default_generator()
    return seed if isinstance(seed, Generator) else Generator(seed)


def _size(name: str, v: Any) -> int:
    """A layer size: an int >= 1 (a zero size would make an empty layer and a 1/sqrt(0)
    initialisation bound)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return int(v)


def _shape(name: str, v: Any) -> tuple[int, ...]:
    shape = (v,) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else tuple(v)
    return tuple(_size(name, d) for d in shape)


def _accumulation(name: Any) -> str:
    """``name`` once the accumulation registry has parsed it (TypeError/ValueError
    naming the choices otherwise), so a layer refuses a bad model when built."""
    resolve_accumulation(name)
    return str(name)


class Linear(Module):
    """y = x W^T + b, W of shape (out, in), init U(-1/sqrt(in), 1/sqrt(in)) like torch."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *,
                 seed: Seed | None = None,
                 accumulation: str = "exact", backend: str = "numpy") -> None:
        super().__init__()
        in_features = _size("in_features", in_features)
        out_features = _size("out_features", out_features)
        g, k = _gen(seed), 1.0 / math.sqrt(in_features)
        self.weight = Parameter(g.uniform((out_features, in_features), -k, k), backend=backend)
        self.bias = Parameter(g.uniform((out_features,), -k, k), backend=backend) \
            if check_flag("bias", bias) else None
        self.accumulation = _accumulation(accumulation)
        #: a training recipe for the three GEMMs (``ampref.recipes.roles.GEMM_RECIPES``),
        #: its profile, the per-layer quantizer state and the stochastic-rounding seed of
        #: the current call; None runs the plain linear (TRN-QNT-001)
        self.recipe: str | None = None
        self.recipe_profile = "te"
        self.quant_state: QuantState | None = None
        self.quant_seed = 0

    def use_recipe(self, recipe: str | None, profile: str = "te", *,
                   collect: bool = False) -> None:
        """Run this layer's GEMMs under ``recipe`` (None: back to the plain linear), with a
        fresh quantizer state."""
        self.recipe, self.recipe_profile = recipe, profile
        self.quant_state = QuantState(collect=collect) if recipe is not None else None

    def forward(self, x: Tensor) -> Tensor:
        if self.recipe is not None:
            return quantized_linear(x, self.weight, self.bias, recipe=self.recipe,
                                      profile=self.recipe_profile,
                                      accumulation=self.accumulation, seed=self.quant_seed,
                                      state=self.quant_state)
        return F.linear(x, self.weight, self.bias, accumulation=self.accumulation)


class Conv2d(Module):
    """2-D convolution, weight (out, in, kh, kw), init U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int],
                 stride: int | tuple[int, int] = 1, padding: int | tuple[int, int] = 0, *,
                 bias: bool = True, seed: Seed | None = None, accumulation: str = "exact",
                 backend: str = "numpy") -> None:
        super().__init__()
        in_channels = _size("in_channels", in_channels)
        out_channels = _size("out_channels", out_channels)
        ks = _shape("kernel_size", kernel_size)
        if len(ks) not in (1, 2):
            raise ValueError(f"kernel_size must be an int or a pair of ints, got {kernel_size!r}")
        kh, kw = (ks[0], ks[0]) if len(ks) == 1 else ks
        g, k = _gen(seed), 1.0 / math.sqrt(in_channels * kh * kw)
        self.weight = Parameter(g.uniform((out_channels, in_channels, kh, kw), -k, k),
                                backend=backend)
        self.bias = Parameter(g.uniform((out_channels,), -k, k), backend=backend) \
            if check_flag("bias", bias) else None
        # checked here, so a bad stride is named when the layer is built, not at its first call
        self.stride, self.padding = conv_pair(stride, "stride", 1), conv_pair(padding, "padding", 0)
        self.accumulation = _accumulation(accumulation)

    def forward(self, x: Tensor) -> Tensor:
        return F.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                        accumulation=self.accumulation)


class LayerNorm(Module):
    """Layer normalisation over the trailing ``normalized_shape`` (weight 1, bias 0)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float = 1e-05,
                 elementwise_affine: bool = True, bias: bool = True, *,
                 backend: str = "numpy") -> None:
        super().__init__()
        self.normalized_shape = _shape("normalized_shape", normalized_shape)
        elementwise_affine = check_flag("elementwise_affine", elementwise_affine)
        bias = check_flag("bias", bias)
        bad = isinstance(eps, bool) or not isinstance(eps, (int, float))
        if bad or not (math.isfinite(eps) and eps >= 0):
            raise ValueError(f"LayerNorm eps must be a finite number >= 0, got {eps!r}")
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape, np.float32), backend=backend) \
            if elementwise_affine else None
        self.bias = Parameter(np.zeros(self.normalized_shape, np.float32), backend=backend) \
            if elementwise_affine and bias else None

    def forward(self, x: Tensor) -> Tensor:
        return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)


class RMSNorm(Module):
    """RMS normalisation over the trailing ``normalized_shape``; ``eps=None`` is the input
    format's machine epsilon (torch's default)."""

    def __init__(self, normalized_shape: int | tuple[int, ...], eps: float | None = None,
                 elementwise_affine: bool = True, *, backend: str = "numpy") -> None:
        super().__init__()
        self.normalized_shape = _shape("normalized_shape", normalized_shape)
        self.weight = Parameter(np.ones(self.normalized_shape, np.float32), backend=backend) \
            if check_flag("elementwise_affine", elementwise_affine) else None
        self.eps = None if eps is None else check_real("RMSNorm eps", eps, lo=0.0)

    def forward(self, x: Tensor) -> Tensor:
        return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)


class Embedding(Module):
    """Rows of a (num, dim) table, init N(0, std^2) (torch: std 1)."""

    def __init__(self, num_embeddings: int, embedding_dim: int, *, std: float = 1.0,
                 seed: Seed | None = None, backend: str = "numpy") -> None:
        super().__init__()
        shape = (_size("num_embeddings", num_embeddings), _size("embedding_dim", embedding_dim))
        std = check_real("Embedding std", std, lo=0.0)
        if std > float(np.finfo(np.float32).max):  # torch stores it as a float32 too
            raise ValueError(f"Embedding std must be a float32 value (at most 3.4e38), got {std!r}")
        self.weight = Parameter(_gen(seed).normal(shape, std), backend=backend)

    def forward(self, ids: Any) -> Tensor:
        return F.embedding(ids, self.weight)


class Dropout(Module):
    """Seeded dropout: the counter advances by the number of elements of every call,
    so the masks of a run are fixed by (seed, call order) and resumable (state_dict).
    Without ``seed`` the layer draws its seed from the global generator
    (``ampref.manual_seed``) when it is built."""

    def __init__(self, p: float = 0.5, *, seed: int | None = None) -> None:
        super().__init__()
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be a number in [0, 1], got {p!r}")
        self.p, self.offset = p, 0
        self.seed = default_generator().draw_seed() if seed is None else check_seed(seed)

    def forward(self, x: Tensor) -> Tensor:
        if not self.training or self.p == 0.0:
            return x
        out = F.dropout(x, self.p, seed=self.seed, offset=self.offset)
        self.offset += x.numel()
        return out


class ReLU(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.relu(x)


class GELU(Module):
    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(x, self.approximate)


class Tanh(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanh(x)


class Sequential(Module):
    def __init__(self, *args: Module) -> None:
        super().__init__()
        for i, layer in enumerate(args):
            if not isinstance(layer, Module):
                raise TypeError(f"Sequential takes Modules, argument {i} is {type(layer).__name__}")
            setattr(self, str(i), layer)
        self.layers = list(args)

    def forward(self, x: Any) -> Any:
        for layer in self.layers:
            x = layer(x)
        return x


class MLP(Sequential):
    """Linear layers of ``sizes`` with an activation between them."""

    def __init__(self, sizes: list[int], activation: str = "relu", *, seed: Seed | None = None,
                 accumulation: str = "exact", backend: str = "numpy") -> None:
        acts = {"relu": ReLU, "gelu": GELU, "tanh": Tanh}
        if activation not in acts:
            raise ValueError(f"unknown activation {activation!r}; choose one of {', '.join(acts)}")
        if len(sizes) < 2:
            raise ValueError(f"MLP needs at least two sizes (in, out), got {sizes}")
        g = _gen(seed)
        layers: list[Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=True)):
            layers.append(Linear(a, b, seed=g, accumulation=accumulation, backend=backend))
            if i < len(sizes) - 2:
                layers.append(acts[activation]())
        super().__init__(*layers)


class MultiheadAttention(Module):
    """Self-attention: one (3d, d) projection, heads of d/h, SDPA, output projection."""

    def __init__(self, embed_dim: int, num_heads: int, *, causal: bool = True,
                 seed: Seed | None = None,
                 accumulation: str = "exact", backend: str = "numpy") -> None:
        super().__init__()
        dim, heads = _size("embed_dim", embed_dim), _size("num_heads", num_heads)
        if dim % heads:
            raise ValueError(f"embed_dim {dim} is not divisible by num_heads {heads}")
        g = _gen(seed)
        accumulation = _accumulation(accumulation)
        self.qkv = Linear(dim, 3 * dim, seed=g, accumulation=accumulation, backend=backend)
        self.proj = Linear(dim, dim, seed=g, accumulation=accumulation, backend=backend)
        self.heads, self.accumulation = heads, accumulation
        self.causal = check_flag("causal", causal)

    def forward(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        h = self.heads
        qkv = self.qkv(x).reshape(B, T, 3, h, D // h)
        q, k, v = (F.transpose(qkv[:, :, i], 1, 2) for i in range(3))  # (B, h, T, D/h)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal,
                                           accumulation=self.accumulation)
        return self.proj(F.transpose(o, 1, 2).reshape(B, T, D))


class TransformerBlock(Module):
    """Pre-norm block: x + attn(ln1(x)), then x + mlp(ln2(x)) (GELU, width ratio 4)."""

    def __init__(self, dim: int, heads: int, *, mlp_ratio: int = 4, causal: bool = True,
                 seed: Seed | None = None, accumulation: str = "exact",
                 backend: str = "numpy") -> None:
        super().__init__()
        g = _gen(seed)
        self.ln1 = LayerNorm(dim, backend=backend)
        self.attn = MultiheadAttention(dim, heads, causal=causal, seed=g, accumulation=accumulation,
                                       backend=backend)
        self.ln2 = LayerNorm(dim, backend=backend)
        self.mlp = MLP([dim, mlp_ratio * dim, dim], "gelu", seed=g, accumulation=accumulation,
                       backend=backend)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))
