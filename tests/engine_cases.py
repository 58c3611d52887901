"""Op cases shared by the engine tests: name -> (input shapes, engine function, torch function).

Inputs are float tensors; integer targets and ids are fixed inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import ampref
from ampref.engine import functional as F

TGT = np.array([0, 2, 1, 3])
IDS = np.array([0, 1, 1, 3])
MASKS = (np.arange(16).reshape(4, 4) % 3 != 0)
#: a gather index with repeats (rows of a 4x3 input, 2 picks each)
GATHER = np.array([[0, 2], [1, 1], [2, 0], [0, 0]])
#: labels for a one-hot matrix (a repeated and an absent class)
LABELS = [2, 0, 2, 1]

Case = tuple[list[tuple[int, ...]], Callable[..., Any], Callable[..., Any] | None, str]


def _torch() -> Any:
    import torch
    import torch.nn.functional as tf

    return torch, tf


def cases() -> dict[str, Case]:
    """op -> (shapes, engine fn, torch fn or None, input domain: 'any' | 'pos' | 'prob')."""
    def T(f: Callable[..., Any]) -> Callable[..., Any]:
        return f

    return {
        "add": ([(4, 3), (3,)], lambda a, b: a + b, T(lambda a, b: a + b), "any"),
        "sub": ([(4, 3), (4, 1)], lambda a, b: a - b, T(lambda a, b: a - b), "any"),
        "mul": ([(4, 3), (4, 3)], lambda a, b: a * b, T(lambda a, b: a * b), "any"),
        "div": ([(4, 3), (4, 3)], lambda a, b: a / b, T(lambda a, b: a / b), "pos"),
        "neg": ([(4, 3)], lambda a: -a, T(lambda a: -a), "any"),
        "pow": ([(4, 3), (4, 3)], lambda a, b: a ** b, T(lambda a, b: a ** b), "pos"),
        "pow_scalar": ([(4, 3)], lambda a: a ** 3.0, T(lambda a: a ** 3.0), "any"),
        "pow_scalar_base": ([(4, 3)], lambda a: 2.0 ** a, T(lambda a: 2.0 ** a), "any"),
        "matmul": ([(2, 4, 3), (3, 5)], lambda a, b: a @ b, T(lambda a, b: a @ b), "any"),
        "matmul_vector_batch": ([(3,), (2, 3, 4)], lambda a, b: a @ b, T(lambda a, b: a @ b),
                                "any"),
        "matmul_batch_vector": ([(2, 4, 3), (3,)], lambda a, b: a @ b, T(lambda a, b: a @ b),
                                "any"),
        "matmul_dot": ([(5,), (5,)], lambda a, b: a @ b, T(lambda a, b: a @ b), "any"),
        "linear": ([(2, 4, 3), (5, 3), (5,)], F.linear,
                   T(lambda x, w, b: _torch()[1].linear(x, w, b)), "any"),
        "exp": ([(4, 3)], F.exp, T(lambda a: a.exp()), "any"),
        "log": ([(4, 3)], F.log, T(lambda a: a.log()), "pos"),
        "tanh": ([(4, 3)], F.tanh, T(lambda a: a.tanh()), "any"),
        "sigmoid": ([(4, 3)], F.sigmoid, T(lambda a: a.sigmoid()), "any"),
        "relu": ([(4, 3)], F.relu, T(lambda a: a.relu()), "any"),
        "silu": ([(4, 3)], F.silu, T(lambda a: _torch()[1].silu(a)), "any"),
        "sqrt": ([(4, 3)], F.sqrt, T(lambda a: a.sqrt()), "pos"),
        "rsqrt": ([(4, 3)], F.rsqrt, T(lambda a: a.rsqrt()), "pos"),
        "var": ([(4, 3)], lambda a: F.var(a, 1), T(lambda a: a.var(1)), "any"),
        "std": ([(4, 3)], lambda a: F.std(a, 0, correction=0), T(lambda a: a.std(0, correction=0)),
                "any"),
        "sort": ([(4, 3)], lambda a: F.sort(a, 0, True).values,
                 T(lambda a: a.sort(dim=0, descending=True, stable=True).values), "any"),
        "topk": ([(4, 3)], lambda a: F.topk(a, 2, 1).values, T(lambda a: a.topk(2, 1).values),
                 "any"),
        "gather": ([(4, 3)], lambda a: F.gather(a, 1, GATHER),
                   T(lambda a: a.gather(1, _torch()[0].tensor(GATHER))), "any"),
        "pad": ([(4, 3)], lambda a: F.pad(a, (1, 2), value=0.5),
                T(lambda a: _torch()[1].pad(a, (1, 2), value=0.5)), "any"),
        "one_hot_matmul": ([(3, 2)], lambda a: F.one_hot(ampref.tensor(LABELS), 3).to(a) @ a,
                           T(lambda a: _torch()[1].one_hot(_torch()[0].tensor(LABELS), 3)
                             .to(a) @ a), "any"),
        "log1p": ([(4, 3)], F.log1p, T(lambda a: a.log1p()), "pos"),
        "expm1": ([(4, 3)], F.expm1, T(lambda a: a.expm1()), "any"),
        "reciprocal": ([(4, 3)], F.reciprocal, T(lambda a: a.reciprocal()), "pos"),
        "leaky_relu": ([(4, 3)], lambda a: F.leaky_relu(a, 0.2),
                       T(lambda a: _torch()[1].leaky_relu(a, 0.2)), "any"),
        "sin": ([(4, 3)], F.sin, T(lambda a: a.sin()), "any"),
        "cos": ([(4, 3)], F.cos, T(lambda a: a.cos()), "any"),
        "stack": ([(4, 3), (4, 3)], lambda a, b: F.stack([a, b], -2),
                  T(lambda a, b: _torch()[0].stack([a, b], -2)), "any"),
        "outer": ([(4,), (3,)], F.outer, T(lambda a, b: _torch()[0].outer(a, b)), "any"),
        "where": ([(4, 3), (3,)], lambda a, b: F.where(MASKS[:, :3], a, b),
                  T(lambda a, b: _torch()[0].where(_torch()[0].tensor(MASKS[:, :3]), a, b)),
                  "any"),
        "where_scalar": ([(4, 3)], lambda a: F.where(MASKS[:, :3], 0.5, a),
                         T(lambda a: _torch()[0].where(_torch()[0].tensor(MASKS[:, :3]), 0.5, a)),
                         "any"),
        "abs": ([(4, 3)], F.abs, T(lambda a: a.abs()), "any"),
        "clamp": ([(4, 3)], lambda a: F.clamp(a, -0.3, 0.4), T(lambda a: a.clamp(-0.3, 0.4)),
                  "any"),
        "max": ([(4, 3)], lambda a: F.max(a), T(lambda a: a.max()), "any"),
        "max_dim": ([(4, 3)], lambda a: F.max(a, 1).values, T(lambda a: a.max(1).values), "any"),
        "min": ([(4, 3)], lambda a: F.min(a), T(lambda a: a.min()), "any"),
        "min_dim_keepdim": ([(4, 3)], lambda a: F.min(a, 0, True)[0],
                            T(lambda a: a.min(0, True)[0]), "any"),
        "tril": ([(2, 3, 4)], lambda a: F.tril(a, 1), T(lambda a: a.tril(1)), "any"),
        "triu": ([(3, 4)], lambda a: F.triu(a, -1), T(lambda a: a.triu(-1)), "any"),
        "gelu": ([(4, 3)], F.gelu, T(lambda a: _torch()[1].gelu(a)), "any"),
        "gelu_tanh": ([(4, 3)], lambda a: F.gelu(a, "tanh"),
                      T(lambda a: _torch()[1].gelu(a, approximate="tanh")), "any"),
        "softmax": ([(4, 5)], lambda a: F.softmax(a, -1), T(lambda a: a.softmax(-1)), "any"),
        "log_softmax": ([(4, 5)], lambda a: F.log_softmax(a, 0), T(lambda a: a.log_softmax(0)),
                        "any"),
        "layer_norm": ([(3, 5), (5,), (5,)], lambda x, w, b: F.layer_norm(x, (5,), w, b),
                       T(lambda x, w, b: _torch()[1].layer_norm(x, (5,), w, b)), "any"),
        "rms_norm": ([(3, 5), (5,)], lambda x, w: F.rms_norm(x, (5,), w, 1e-6),
                     T(lambda x, w: _torch()[1].rms_norm(x, (5,), w, eps=1e-6)), "any"),
        "sum": ([(4, 3)], lambda a: F.sum(a, 0), T(lambda a: a.sum(0)), "any"),
        "mean": ([(4, 3)], lambda a: F.mean(a, (0, 1)), T(lambda a: a.mean()), "any"),
        "reshape": ([(4, 3)], lambda a: a.reshape(3, 4), T(lambda a: a.reshape(3, 4)), "any"),
        "transpose": ([(4, 3)], lambda a: a.T, T(lambda a: a.T), "any"),
        "permute": ([(2, 3, 4)], lambda a: F.permute(a, (2, 0, 1)),
                    T(lambda a: a.permute(2, 0, 1)), "any"),
        "broadcast_to": ([(1, 3)], lambda a: F.broadcast_to(a, (4, 3)),
                         T(lambda a: a.expand(4, 3)), "any"),
        "index": ([(4, 3)], lambda a: a[np.array([0, 2, 2])], T(lambda a: a[[0, 2, 2]]), "any"),
        "embedding": ([(4, 3)], lambda w: F.embedding(IDS, w),
                      T(lambda w: _torch()[1].embedding(_torch()[0].tensor(IDS), w)), "any"),
        "concat": ([(2, 3), (1, 3)], lambda a, b: F.concat([a, b], 0),
                   T(lambda a, b: _torch()[0].cat([a, b], 0)), "any"),
        "masked_fill": ([(4, 4)], lambda a: F.masked_fill(a, MASKS, 0.0),
                        T(lambda a: a.masked_fill(_torch()[0].tensor(MASKS), 0.0)), "any"),
        "cross_entropy": ([(4, 5)], lambda a: F.cross_entropy(a, TGT),
                          T(lambda a: _torch()[1].cross_entropy(a, _torch()[0].tensor(TGT))),
                          "any"),
        "nll_loss": ([(4, 5)], lambda a: F.nll_loss(a, TGT),
                     T(lambda a: _torch()[1].nll_loss(a, _torch()[0].tensor(TGT))), "any"),
        "mse_loss": ([(4, 3), (4, 3)], F.mse_loss, T(lambda a, b: _torch()[1].mse_loss(a, b)),
                     "any"),
        "binary_cross_entropy": ([(4, 3), (4, 3)], F.binary_cross_entropy,
                                 T(lambda p, y: _torch()[1].binary_cross_entropy(p, y)), "prob"),
        "scaled_dot_product_attention": (
            [(2, 4, 3), (2, 5, 3), (2, 5, 2)], F.scaled_dot_product_attention,
            T(lambda q, k, v: _torch()[1].scaled_dot_product_attention(q, k, v)), "any"),
        "scaled_dot_product_attention_causal": ([(2, 4, 3), (2, 4, 3), (2, 4, 2)],
                        lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                        T(lambda q, k, v: _torch()[1].scaled_dot_product_attention(
                            q, k, v, is_causal=True)),
                        "any"),
        "dropout": ([(4, 3)], lambda a: F.dropout(a, 0.25, seed=7), None, "any"),
        # float64 -> float64 is the identity; casts to narrower formats are checked bitwise
        # in test_engine (ENG-CST-001), not by finite differences
        "to_format": ([(4, 3)], lambda a: F.to_format(a, "float64"), T(lambda a: a.double()),
                      "any"),
        "conv2d": ([(2, 2, 5, 4), (3, 2, 3, 2), (3,)], lambda x, w, b: F.conv2d(x, w, b, padding=1),
                   T(lambda x, w, b: _torch()[1].conv2d(x, w, b, padding=1)), "any"),
        "conv2d_strided": ([(1, 2, 6, 5), (2, 2, 2, 3)], lambda x, w: F.conv2d(x, w, stride=(2, 1)),
                           T(lambda x, w: _torch()[1].conv2d(x, w, stride=(2, 1))), "any"),
    }


def inputs(shapes: list[tuple[int, ...]], domain: str, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for s in shapes:
        x = rng.standard_normal(s)
        if domain == "pos":
            x = np.abs(x) + 0.5
        elif domain == "prob":
            x = 0.1 + 0.8 * rng.random(s)
        out.append(x)
    return out
