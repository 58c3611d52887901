"""No foreign exception from the public API: each argument of each call in the table is
replaced, one at a time, by each of a dozen wrong values (None, strings, floats, negative
numbers, empty lists, complex and object arrays, bools, NaN, dicts, tuples); the call
must either work or raise ValueError/TypeError naming the problem (FileNotFoundError for
paths, IndexError for indexing, as Python and torch do) (API-ERR-001, issue 28). Warnings
are errors here: a ComplexWarning means an imaginary part was dropped silently."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ampref
from ampref import nn, optim, recipes, tensorcore
from ampref.engine import functional as F

BAD: list[Any] = [None, "x", 1.5, -1, 0, [], np.array([1j]), np.ones((2, 2), object), True,
                  float("nan"), {}, (1,)]
X = np.ones((4, 32), np.float32)


def _t(*shape: int) -> ampref.Tensor:
    return ampref.tensor(np.ones(shape or (2, 3), np.float32))


def _calls(tmp: Path) -> dict[str, tuple[Callable[..., Any], list[Any], dict[str, Any], int]]:
    """name -> (callable, positional args, keyword args, first position to replace)."""
    sgd = optim.SGD(nn.Linear(2, 2, seed=0).parameters(), lr=0.1)
    ckpt = str(tmp / "f.ckpt")
    ampref.save({"a": 1}, ckpt)
    return {
        "quantize": (ampref.quantize, [X, "bf16"], {"rounding": "nearest_even"}, 0),
        "encode": (ampref.encode, [X, "e4m3"], {}, 0),
        "decode": (ampref.decode, [np.array([1, 2], np.uint8), "e4m3"], {}, 0),
        "value_table": (ampref.value_table, ["e4m3"], {}, 0),
        "error_bound": (ampref.error_bound, [np.ones(4), np.ones(4)], {}, 0),
        "matmul": (ampref.matmul, [np.ones((2, 4)), np.ones((4, 2))],
                   {"input_format": "float32"}, 0),
        "tensorcore.dot": (tensorcore.dot, [np.ones(16), np.ones(16)],
                           {"gpu": "h100", "input_format": "fp16"}, 0),
        "tensorcore.gemm": (tensorcore.gemm, [np.ones((4, 16)), np.ones((4, 16)),
                                              np.zeros((4, 4))],
                            {"gpu": "h100", "input_format": "fp16"}, 0),
        "recipes.quantize": (recipes.quantize, [X, "mxfp8_e4m3"], {"profile": "ocp"}, 0),
        "recipes.matmul": (lambda a, b, **k: recipes.matmul(
            recipes.quantize(a, "mxfp8_e4m3"), recipes.quantize(b, "mxfp8_e4m3"), **k),
            [X, X], {"accumulation": "exact"}, 0),
        "get_policy": (ampref.get_policy, ["params=float32,compute=float16,output=float32"],
                       {}, 0),
        "Linear": (nn.Linear, [3, 4], {}, 0),
        "Conv2d": (nn.Conv2d, [1, 2, 3], {}, 0),
        "LayerNorm": (nn.LayerNorm, [3], {}, 0),
        "Embedding": (nn.Embedding, [5, 3], {}, 0),
        "MultiheadAttention": (nn.MultiheadAttention, [4, 2], {}, 0),
        "Dropout": (nn.Dropout, [0.5], {}, 0),
        "SGD": (optim.SGD, [nn.Linear(2, 2).parameters()], {"lr": 0.1}, 0),
        "Adam": (optim.Adam, [nn.Linear(2, 2).parameters()], {"lr": 0.1}, 0),
        "StepLR": (optim.lr_scheduler.StepLR, [sgd, 2], {}, 0),
        "LossScaler": (ampref.LossScaler, [], {"init_scale": 2.0**16}, 0),
        "GradScaler": (ampref.amp.GradScaler, ["cpu"], {}, 0),
        "F.linear": (F.linear, [_t(2, 3), _t(4, 3)], {}, 0),
        "F.softmax": (F.softmax, [_t(), 1], {}, 0),
        "F.layer_norm": (F.layer_norm, [_t(), [3]], {}, 0),
        "F.rms_norm": (F.rms_norm, [_t(), [3]], {}, 0),
        "F.embedding": (F.embedding, [np.array([0, 1]), _t(4, 3)], {}, 0),
        "F.conv2d": (F.conv2d, [_t(1, 1, 4, 4), _t(1, 1, 3, 3)], {}, 0),
        "F.attention": (F.scaled_dot_product_attention, [_t(1, 2, 3, 4)] * 3, {}, 0),
        "F.cross_entropy": (F.cross_entropy, [_t(2, 3), ampref.tensor([0, 1])], {}, 0),
        "F.mse_loss": (F.mse_loss, [_t(), _t()], {}, 0),
        "F.gelu": (F.gelu, [_t()], {}, 0),
        "F.pow": (F.pow, [_t(), 2], {}, 0),
        "F.sum": (F.sum, [_t()], {"dim": 0}, 0),
        "F.mean": (F.mean, [_t()], {"dim": 0}, 0),
        "F.reshape": (F.reshape, [_t(), (3, 2)], {}, 0),
        "F.transpose": (F.transpose, [_t(), 0, 1], {}, 0),
        "F.concat": (F.concat, [[_t(), _t()]], {"dim": 0}, 0),
        "F.masked_fill": (F.masked_fill, [_t(), np.zeros((2, 3), bool), 0.0], {}, 0),
        "F.to_format": (F.to_format, [_t(), "bf16"], {}, 0),
        "tensor": (ampref.tensor, [[1.0, 2.0]], {}, 0),
        "randn": (ampref.randn, [2, 3], {}, 0),
        "randint": (ampref.randint, [0, 5, (3,)], {}, 0),
        "arange": (ampref.arange, [5], {}, 0),
        "full": (ampref.full, [(2,), 1.0], {}, 0),
        "save": (ampref.save, [{"a": 1}, ckpt], {}, 0),
        "load": (ampref.load, [ckpt], {}, 0),
        "Tensor.view": (lambda t, *s: t.view(*s), [_t(), 3, 2], {}, 1),
        "Tensor.flatten": (lambda t, a, b: t.flatten(a, b), [_t(2, 3, 4), 1, 2], {}, 1),
        "Tensor.unsqueeze": (lambda t, d: t.unsqueeze(d), [_t(), 0], {}, 1),
        "Tensor.squeeze": (lambda t, d: t.squeeze(d), [_t(1, 3), 0], {}, 1),
        "Tensor.chunk": (lambda t, c, d: t.chunk(c, d), [_t(), 3, 1], {}, 1),
        "Tensor.split": (lambda t, c, d: t.split(c, d), [_t(), 1, 1], {}, 1),
        "Tensor.argmax": (lambda t, d: t.argmax(d), [_t(), 1], {}, 1),
        "Linear()": (lambda m, x: m(x), [nn.Linear(3, 4), _t(2, 3)], {}, 1),
        "LayerNorm()": (lambda m, x: m(x), [nn.LayerNorm(3), _t(2, 3)], {}, 1),
        "Embedding()": (lambda m, x: m(x), [nn.Embedding(5, 3), ampref.tensor([1, 2])], {}, 1),
        "CrossEntropyLoss()": (lambda m, x, y: m(x, y), [nn.CrossEntropyLoss(), _t(2, 3),
                                                        ampref.tensor([0, 1])], {}, 1),
        "Module.load_state_dict": (lambda m, sd: m.load_state_dict(sd), [
            nn.Linear(2, 2), nn.Linear(2, 2).state_dict()], {}, 1),
        "Optimizer.load_state_dict": (lambda o, sd: o.load_state_dict(sd), [
            sgd, sgd.state_dict()], {}, 1),
        "Generator.load_state_dict": (lambda g, sd: g.load_state_dict(sd), [
            ampref.Generator(), {"seed": 1, "counter": 0}], {}, 1),
    }


EXPECTED = (ValueError, TypeError, FileNotFoundError)


@pytest.mark.clause("API-ERR-001")
def test_no_public_call_lets_a_foreign_exception_or_a_warning_escape(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: 60+ public calls with each argument replaced by each of a dozen wrong values
    (None, strings, floats, negatives, empty lists, complex and object arrays, bools, NaN,
    dicts, tuples). Expected: success or ValueError/TypeError/FileNotFoundError, no
    warning. Pass: no foreign exception."""
    # a path argument replaced by "x" is a valid relative path: it must land here, not
    # in the checkout (save wrote ./x into the source root)
    monkeypatch.chdir(tmp_path)
    foreign = []
    calls = _calls(tmp_path)
    for name, (fn, args, kw, first) in calls.items():
        fn(*args, **kw)  # the unmodified call works
        slots = [("pos", i) for i in range(first, len(args))] + [("kw", k) for k in kw]
        for kind, key in slots:
            for bad in BAD:
                a2, k2 = list(args), dict(kw)
                if kind == "pos":
                    a2[int(key)] = bad
                else:
                    k2[str(key)] = bad
                with warnings.catch_warnings():
                    warnings.simplefilter("error")
                    try:
                        fn(*a2, **k2)
                    except EXPECTED:
                        pass
                    except Exception as e:  # noqa: BLE001 - collecting the foreign ones
                        foreign.append(f"{name}[{key}]={bad!r:.20}: {type(e).__name__}: {e}")
    assert len(calls) >= 60
    assert foreign == [], "\n".join(foreign[:20])
