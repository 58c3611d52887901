"""Engine ops (``ampref.functional``, torch.nn.functional's names): forward numerics,
autocast category and derivative side by side, one module per family (elementwise,
linalg, reductions, shapes, norms, losses, attention, trigonometry; plumbing in
``core``).

Every op follows the rounding rules of ``specs/engine.md``:

* ENG-RND-001 elementwise ops compute in float32 (+ - * / are IEEE float32 operations;
  exp, log, log1p, expm1, tanh, erf, sqrt, sin, cos are evaluated in float64 and rounded to float32)
  and round once to the output format; float64 tensors compute in float64 throughout.
* ENG-MM-001 matmul: fl_out(fl32(exact a.b)) under the default ``exact`` accumulation
  (or any model of :mod:`ampref.accumulation.models`).
* ENG-RED-001 sums: fl_out(fl32(exact sum)); mean = fl_out(fl32(fl32(sum) / n)).
* ENG-PRM-001 the compute format of a multi-input op is the common format of its
  inputs: equal formats stay, float64 wins, any other mix (fp16+fp32, fp16+bf16) is
  float32 (torch's promote_types). Python scalars are weak: they take the tensor's
  format and are rounded to float32 first.
* ENG-BWD-001 each op's derivative is evaluated with the same rules (float32 arithmetic,
  exact-then-fp32 sums and matmuls); the engine rounds it to the input's format.

NaN and inf propagate with IEEE semantics (relu(NaN) = NaN, exp(inf) = inf, log(0) =
-inf, log(-1) = NaN); overflow in the output format gives ±inf (fp16/bf16).
"""

from __future__ import annotations

from .attention import scaled_dot_product_attention
from .core import to_format
from .elementwise import (add, div, dropout, exp, gelu, log, masked_fill, mul, neg, pow, relu,
                          rsqrt, sigmoid, silu, sqrt, sub, tanh)
from .extremes import abs, clamp, max, min
from .gathers import gather, one_hot, pad
from .linalg import conv2d, linear, matmul
from .losses import binary_cross_entropy, cross_entropy, mse_loss, nll_loss
from .moments import std, var
from .norms import layer_norm, log_softmax, rms_norm, softmax
from .ordering import sort, topk
from .reductions import mean, sum
from .selection import tril, triu, where
from .shapes import (broadcast_to, concat, embedding, index, outer, permute, reshape, stack,
                     transpose)
from .trigonometry import cos, sin
from .unaries import expm1, leaky_relu, log1p, reciprocal

__all__ = [
    "abs",
    "add",
    "binary_cross_entropy",
    "broadcast_to",
    "clamp",
    "concat",
    "conv2d",
    "cos",
    "cross_entropy",
    "div",
    "dropout",
    "embedding",
    "exp",
    "expm1",
    "gather",
    "gelu",
    "index",
    "layer_norm",
    "leaky_relu",
    "linear",
    "log",
    "log1p",
    "log_softmax",
    "masked_fill",
    "matmul",
    "max",
    "mean",
    "min",
    "mse_loss",
    "mul",
    "neg",
    "nll_loss",
    "one_hot",
    "outer",
    "pad",
    "permute",
    "pow",
    "reciprocal",
    "relu",
    "reshape",
    "rms_norm",
    "rsqrt",
    "scaled_dot_product_attention",
    "sigmoid",
    "silu",
    "sin",
    "softmax",
    "sort",
    "sqrt",
    "stack",
    "std",
    "sub",
    "sum",
    "tanh",
    "to_format",
    "topk",
    "transpose",
    "tril",
    "triu",
    "var",
    "where",
]
