"""In-place writes into float tensors (ENG-INP-001) against torch's results, the refusal
while recording gradients, and what a fresh array per write means for earlier graphs."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref.testing import assert_bitwise_equal

#: values with fp16/bf16 rounding, a subnormal, ±0 and ±inf
BASE = np.array([[1 + 2**-11 + 2**-20, -0.0, 3e-6, np.inf], [70000.0, 0.1, -2.5, 1e-40]],
                np.float32)

#: name -> the same in-place call on an ampref or torch tensor (lib: the module)
CALLS: dict[str, Any] = {
    "add_": lambda lib, t: t.add_(0.1),
    "sub_ tensor": lambda lib, t: t.sub_(lib.tensor(np.array([1.5, -0.25, 2.0, 0.0], np.float32))),
    "mul_": lambda lib, t: t.mul_(3),
    "div_": lambda lib, t: t.div_(7.0),
    "iadd": lambda lib, t: t.__iadd__(lib.tensor(np.array([[0.5], [-1.0]], np.float32))),
    "isub": lambda lib, t: t.__isub__(2**-12),
    "imul": lambda lib, t: t.__imul__(-1.0),
    "idiv": lambda lib, t: t.__itruediv__(3.0),
    "clamp_": lambda lib, t: t.clamp_(-1.0, 2.0),
    "fill_": lambda lib, t: t.fill_(0.3),
    "zero_": lambda lib, t: t.zero_(),
    "copy_": lambda lib, t: t.copy_(lib.tensor(np.array([0.1, 1e-8, -7.0, 65519.0], np.float32))),
    "masked_fill_": lambda lib, t: t.masked_fill_(t > 0.05, -np.inf),
    "setitem mask": lambda lib, t: t.__setitem__(t < 0, 0.7),
    "setitem slice": lambda lib, t: t.__setitem__((slice(None), 1), lib.tensor([2.0, 3.0])),
    "setitem index": lambda lib, t: t.__setitem__((1, 2), 1e-3),
}


@pytest.mark.clause("ENG-INP-001", "ENG-PRM-001")
@pytest.mark.parametrize("fmt", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CALLS))
def test_each_in_place_write_equals_torchs(name: str, fmt: str) -> None:
    """Inputs: BASE (values that round in the 16-bit formats, a subnormal, ±0, inf) in
    ``fmt``, one in-place call under no_grad. Expected: torch's values in torch's dtype
    (the destination's), bit for bit, NaN any; the call returns the tensor itself
    (setitem returns None). Pass: equal."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    ours = ampref.tensor(BASE, fmt)
    theirs = torch.tensor(BASE).to(getattr(torch, fmt))
    with ampref.no_grad():
        got = CALLS[name](ampref, ours)
    with torch.no_grad():
        CALLS[name](torch, theirs)
    assert got is ours or (got is None and name.startswith("setitem"))
    assert_same_result(ours, theirs, f"{name} in {fmt}")


@pytest.mark.clause("ENG-INP-001", "API-ERR-001")
@pytest.mark.parametrize("name", ["add_", "fill_", "setitem mask", "copy_"])
def test_a_tensor_that_requires_grad_is_refused_while_recording(name: str) -> None:
    """Inputs: a leaf that requires grad, and a non-leaf computed from it; one in-place
    call each with gradients recorded. Expected: RuntimeError naming the op and the fix
    (no_grad) for both (torch refuses the leaf too); under no_grad the leaf is written.
    Pass: raises, then writes."""
    leaf = ampref.tensor(BASE, requires_grad=True)
    for t in (leaf, leaf * 2):
        with pytest.raises(RuntimeError, match="cannot be written in place.*no_grad"):
            CALLS[name](ampref, t)
    with ampref.no_grad():
        CALLS[name](ampref, leaf)
    assert leaf.is_leaf and leaf.requires_grad


@pytest.mark.clause("ENG-INP-001", "ENG-BWD-003")
def test_a_write_leaves_values_an_earlier_graph_saved_unchanged() -> None:
    """Inputs: w requiring grad, x = [2, 3]; y = sum(x * w); then x.fill_(0) under
    no_grad; backward. Expected: w.grad = [2, 3] (the values at the multiplication: each
    write gives the tensor a fresh array); x now holds zeros. Pass: exact."""
    w = ampref.tensor([1.0, 1.0], requires_grad=True)
    x = ampref.tensor([2.0, 3.0])
    y = (x * w).sum()
    with ampref.no_grad():
        x.fill_(0.0)
    y.backward()
    assert_bitwise_equal(w.grad, np.array([2.0, 3.0], np.float32))
    assert x.numpy().tolist() == [0.0, 0.0]


@pytest.mark.clause("ENG-INP-001", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda t: t.add_(ampref.ones(2, 4)), RuntimeError, "cannot change the destination"),
    (lambda t: t.fill_("x"), TypeError, "real number"),
    (lambda t: t.__setitem__(0, [1.0]), TypeError, "real number"),
    (lambda t: t.copy_(np.ones(2)), TypeError, "copy_"),
    (lambda t: t.__setitem__(5, 1.0), IndexError, "5"),
])
def test_bad_in_place_writes_are_refused(call: Any, error: Any, match: str) -> None:
    """Inputs: a result of another shape, non-numeric values, a NumPy source for copy_, an
    index past the end. Expected: the error naming it; the tensor unchanged. Pass:
    raises, values kept."""
    t = ampref.tensor(BASE[0])
    with ampref.no_grad(), pytest.raises(error, match=match):
        call(t)
    assert t.numpy().tobytes() == BASE[0].tobytes()


@pytest.mark.clause("ENG-INP-001")
def test_manual_sgd_under_no_grad_updates_the_parameters_of_the_model() -> None:
    """Inputs: a Linear(2, 1) trained one step by hand: loss.backward(), then for each
    parameter p -= lr * tensor(p.grad) under no_grad. Expected: the model's own
    parameters changed (the same objects, still leaves requiring grad) by exactly
    fl32(p - fl32(lr * g)). Pass: bitwise."""
    ampref.manual_seed(0)
    lin = ampref.nn.Linear(2, 1)
    before = [p.numpy() for p in lin.parameters()]
    lin(ampref.tensor([[1.0, -2.0]])).sum().backward()
    grads = [np.asarray(p.grad) for p in lin.parameters()]
    with ampref.no_grad():
        for p in lin.parameters():
            p -= 0.1 * ampref.tensor(p.grad)
    for p, b, g in zip(lin.parameters(), before, grads, strict=True):
        assert p.is_leaf and p.requires_grad
        assert_bitwise_equal(p.numpy(), b - np.float32(0.1) * g)
