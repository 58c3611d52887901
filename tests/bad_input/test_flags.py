"""Every boolean parameter of the public API accepts only bool (and NumPy bool): a
string such as "no" is truthy and would silently mean True, a 0/1 int hides a swapped
argument. One table, one row per (call, parameter); a new flag is one row (API-ERR-001,
issue 28)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import ampref
from ampref import accumulation, nn, optim
from ampref.certify import verify
from ampref.engine import functional as F


def _params() -> list[ampref.Tensor]:
    return nn.Linear(2, 2, seed=0).parameters()


def _scaler_step(flag: Any) -> Any:
    model = nn.Linear(2, 1, seed=0)
    opt = optim.SGD(model.parameters(), lr=0.1)
    scaler = ampref.amp.GradScaler("cpu")
    scaler.scale(F.mean(model(ampref.tensor(np.ones((1, 2)))))).backward()
    return scaler.step(opt, return_found_inf=flag)


def _grads() -> list[ampref.Tensor]:
    ps = _params()
    for p in ps:
        p.grad = np.ones(p.shape, np.float32)
    return ps


X = np.array([1.5, -3.25], np.float32)
T = ampref.tensor(np.ones((2, 3)))

#: (name, call taking the flag value, parameter named in the error)
FLAGS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("quantize saturate", lambda v: ampref.quantize(X, "e4m3", saturate=v), "saturate"),
    ("quantize subnormals", lambda v: ampref.quantize(X, "e4m3", subnormals=v), "subnormals"),
    ("encode saturate", lambda v: ampref.encode(X, "e4m3", saturate=v), "saturate"),
    ("encode subnormals", lambda v: ampref.encode(X, "e4m3", subnormals=v), "subnormals"),
    ("accumulation.dot quantize_inputs", lambda v: accumulation.dot(
        X, X, input_format="bf16", quantize_inputs=v), "quantize_inputs"),
    ("accumulation.matmul quantize_inputs", lambda v: accumulation.matmul(
        np.ones((2, 2)), np.ones((2, 2)), input_format="bf16", quantize_inputs=v),
     "quantize_inputs"),
    ("tensorcore.dot quantize_inputs", lambda v: ampref.tensorcore.dot(
        X, X, gpu="h100", input_format="fp16", quantize_inputs=v), "quantize_inputs"),
    ("GradScaler.step return_found_inf", _scaler_step, "return_found_inf"),
    ("Linear bias", lambda v: nn.Linear(2, 2, v), "bias"),
    ("Conv2d bias", lambda v: nn.Conv2d(1, 1, 3, bias=v), "bias"),
    ("LayerNorm elementwise_affine", lambda v: nn.LayerNorm(3, elementwise_affine=v),
     "elementwise_affine"),
    ("MultiheadAttention causal", lambda v: nn.MultiheadAttention(4, 2, causal=v), "causal"),
    ("Module.train mode", lambda v: nn.Linear(2, 2).train(v), "mode"),
    ("Module.zero_grad set_to_none", lambda v: nn.Linear(2, 2).zero_grad(v), "set_to_none"),
    ("Optimizer master_weights", lambda v: optim.Adam(_params(), master_weights=v),
     "master_weights"),
    ("Optimizer.zero_grad set_to_none", lambda v: optim.SGD(_params()).zero_grad(v),
     "set_to_none"),
    ("SGD nesterov", lambda v: optim.SGD(_params(), momentum=0.9, nesterov=v), "nesterov"),
    ("clip_grad_norm_ error_if_nonfinite", lambda v: nn.utils.clip_grad_norm_(
        _grads(), 1.0, error_if_nonfinite=v), "error_if_nonfinite"),
    ("sum keepdim", lambda v: F.sum(T, 0, v), "keepdim"),
    ("mean keepdim", lambda v: F.mean(T, 0, v), "keepdim"),
    ("dropout training", lambda v: F.dropout(T, 0.5, v, seed=1), "training"),
    ("attention is_causal", lambda v: F.scaled_dot_product_attention(
        T, T, T, is_causal=v), "is_causal"),
    ("autocast enabled", lambda v: ampref.autocast("cuda", enabled=v).__enter__(), "enabled"),
    ("autocast cache_enabled", lambda v: ampref.autocast(
        "cuda", cache_enabled=v).__enter__(), "cache_enabled"),
    ("tensor requires_grad", lambda v: ampref.tensor([1.0], requires_grad=v), "requires_grad"),
    ("randn requires_grad", lambda v: ampref.randn(2, requires_grad=v), "requires_grad"),
    ("requires_grad_", lambda v: ampref.tensor([1.0]).requires_grad_(v), "requires_grad"),
    ("verify saturate", lambda v: verify.verify("e4m3", stride=2**28, saturate=v,
                                                 progress=False, workers=1), "saturate"),
    ("verify subnormals", lambda v: verify.verify("e4m3", stride=2**28, subnormals=v,
                                                   progress=False, workers=1), "subnormals"),
]


@pytest.mark.clause("API-ERR-001")
@pytest.mark.parametrize("bad", ["no", "False", 0, 1, None, 1.0],
                         ids=["str-no", "str-False", "int0", "int1", "None", "float"])
@pytest.mark.parametrize(("call", "param"), [(c, p) for _, c, p in FLAGS],
                         ids=[n for n, _, _ in FLAGS])
def test_a_boolean_parameter_refuses_anything_but_a_bool(call: Callable[[Any], Any],
                                                         param: str, bad: Any) -> None:
    """Inputs: each boolean parameter of the table given 'no', 'False', 0, 1, None, 1.0.
    Expected: TypeError naming the parameter and the value's type. Pass: raised and
    matched."""
    with pytest.raises(TypeError, match=rf"{param} must be a bool .*{type(bad).__name__}"):
        call(bad)


@pytest.mark.clause("API-ERR-001")
@pytest.mark.parametrize(("call", "param"), [(c, p) for _, c, p in FLAGS],
                         ids=[n for n, _, _ in FLAGS])
def test_a_boolean_parameter_accepts_python_and_numpy_bools(call: Callable[[Any], Any],
                                                            param: str) -> None:
    """Inputs: each boolean parameter given True and np.bool_(False). Expected: accepted.
    Pass: no exception."""
    call(True)
    call(np.bool_(False))
