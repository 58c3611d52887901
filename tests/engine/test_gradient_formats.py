"""Which format each gradient lands in, against torch's own backward (ENG-BWD-002,
ENG-DTY-001): for every op with a ``dtype`` argument and every (input, dtype) pair, and
for every engine op with fp16 and bf16 inputs. torch's CPU kernels are not exactly
rounded, so values are compared within a stated bound; the *grid* of each gradient (the
formats that hold every one of its values) must be torch's exactly, which is what a
gradient rounded to the wrong format changes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from engine_cases import cases, inputs

import ampref
from ampref.engine import functional as F

FMTS = ("float16", "bfloat16", "float32", "float64")
GRIDS = ("float16", "bfloat16", "float32")
CASES = cases()


def grids(values: np.ndarray) -> set[str]:
    """The formats among fp16, bf16, fp32 that hold every value exactly."""
    v = np.asarray(values, np.float64)
    return {g for g in GRIDS if np.array_equal(ampref.quantize(v, g).astype(np.float64), v)}


def _eps(fmt: str) -> float:
    return float(ampref.get_format(fmt).eps)


def _torch_tensor(torch: Any, a: np.ndarray, fmt: str, grad: bool = False) -> Any:
    return torch.tensor(a, dtype=torch.float64).to(getattr(torch, fmt)).requires_grad_(grad)


def _close(got: np.ndarray, want: np.ndarray, ulps: float, fmt: str, what: str) -> None:
    """|got - want| <= ulps * eps(fmt) * max|want| elementwise (a normwise bound: torch's
    CPU kernels and ampref's exactly rounded ones may differ by rounding in between)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    tol = ulps * _eps(fmt) * max(float(np.max(np.abs(w))), 1e-30)
    worst = float(np.max(np.abs(g - w)))
    assert worst <= tol, f"{what}: differs from torch by {worst:.3g} > {tol:.3g}"


DTYPE_OPS = {
    "softmax": (lambda x, dt: F.softmax(x, 1, dtype=dt),
                lambda t, x, dt: t.softmax(x, 1, dtype=getattr(t, dt))),
    "log_softmax": (lambda x, dt: F.log_softmax(x, 1, dtype=dt),
                    lambda t, x, dt: t.log_softmax(x, 1, dtype=getattr(t, dt))),
    "sum": (lambda x, dt: F.sum(x, 1, dtype=dt),
            lambda t, x, dt: t.sum(x, 1, dtype=getattr(t, dt))),
}


@pytest.mark.clause("ENG-DTY-001", "ENG-BWD-002")
@pytest.mark.parametrize("op", sorted(DTYPE_OPS))
@pytest.mark.parametrize("src", FMTS)
@pytest.mark.parametrize("dtype", FMTS)
def test_an_ops_dtype_argument_casts_the_input_first_as_torch_does(op: str, src: str,
                                                                   dtype: str) -> None:
    """Inputs: a (5, 7) standard-normal tensor in ``src`` and the op with ``dtype``; the
    output gradient a standard-normal tensor in ``dtype``. Expected: torch's output dtype
    and gradient dtype, the gradient on torch's grid (fp16/bf16/fp32 membership: a
    narrower dtype rounds the gradient to it on the way back), values within 8 ulps of
    the narrower format (normwise) of torch's. Pass: all of these."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x, g = rng.standard_normal((5, 7)), rng.standard_normal((5, 7))
    fn, tfn = DTYPE_OPS[op]
    tx = _torch_tensor(torch, x, src, grad=True)
    ty = tfn(torch, tx, dtype)
    tg = _torch_tensor(torch, g[:, 0] if op == "sum" else g, dtype)
    ty.backward(tg)
    ax = ampref.tensor(tx.detach().double().numpy(), src, requires_grad=True)
    ay = fn(ax, dtype)
    ay.backward(ampref.tensor(tg.double().numpy(), dtype))
    assert ay.format.name == str(ty.dtype).removeprefix("torch.")
    narrow = max((src, dtype), key=_eps)
    _close(ay.numpy(), ty.detach().double().numpy(), 8, narrow, f"{op} {src}->{dtype} value")
    tgrad, agrad = tx.grad.double().numpy(), np.asarray(ax.grad, np.float64)
    assert grids(agrad) == grids(tgrad), (f"{op} {src}->{dtype}: gradient on the "
                                          f"{sorted(grids(agrad))} grid, torch's on "
                                          f"{sorted(grids(tgrad))}")
    _close(agrad, tgrad, 8, narrow, f"{op} {src}->{dtype} gradient")


@pytest.mark.clause("ENG-BWD-002")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("op", sorted(k for k, v in CASES.items() if v[2] is not None))
def test_every_ops_input_gradients_land_in_the_inputs_format_as_torchs_do(op: str,
                                                                         fmt: str) -> None:
    """Inputs: the op's standard case (tests/engine_cases.py) with every input rounded
    to ``fmt``, the loss sum(out * W) with W fixed random in ``fmt``; torch runs the same
    in ``fmt`` on the CPU. Expected: each input's gradient on torch's grid (fp16/bf16/
    fp32 membership). Pass: equal grid sets for every input (ops torch's CPU cannot run
    in ``fmt`` skip, naming torch's error)."""
    torch = pytest.importorskip("torch")
    shapes, fn, tfn, dom = CASES[op]
    arrays = [ampref.quantize(a, fmt).astype(np.float64) for a in inputs(shapes, dom, seed=3)]
    tt = [_torch_tensor(torch, a, fmt, grad=True) for a in arrays]
    assert tfn is not None
    try:
        tout = tfn(*tt)
        w = np.random.default_rng(99).standard_normal(tuple(tout.shape))
        (tout * _torch_tensor(torch, w, fmt)).sum().backward()
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch CPU cannot run {op} in {fmt}: {str(exc)[:80]}")
    ts = [ampref.tensor(a, fmt, requires_grad=True) for a in arrays]
    out = fn(*ts)
    (out * ampref.tensor(w, fmt)).sum().backward()
    for k, (t, ref) in enumerate(zip(ts, tt, strict=True)):
        if ref.grad is None:
            continue
        want = grids(ref.grad.double().numpy())
        got = grids(np.asarray(t.grad, np.float64))
        assert got == want, f"{op} ({fmt}) input {k}: gradient grid {sorted(got)}, torch's " \
                            f"{sorted(want)}"
