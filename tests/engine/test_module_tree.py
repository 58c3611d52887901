"""A module tree walked as torch walks it (ENG-NN-002): shared submodules and tied weights
listed once, buffers saved and loaded, ``apply`` children first, ``requires_grad_``.
The name lists are compared with torch's for the same tree when torch is installed."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref import nn
from ampref.testing import assert_bitwise_equal


def _tree(torch_like: Any) -> Any:
    """The same tree in either library: a tied embedding/output weight, a submodule
    shared by two parents, persistent and non-persistent buffers (float, int, bool), a
    None parameter, nested containers."""
    tnn = torch_like.nn

    class Block(tnn.Module):  # type: ignore[name-defined]
        def __init__(self, shared: Any) -> None:
            super().__init__()
            self.norm = tnn.LayerNorm(4)
            self.proj = tnn.Linear(4, 4)
            self.shared = shared
            self.register_buffer("mask", torch_like.tril(torch_like.ones(3, 3)) == 1)
            self.register_buffer("steps", torch_like.zeros(2, dtype=torch_like.int64),
                                 persistent=False)

    class Net(tnn.Module):  # type: ignore[name-defined]
        def __init__(self) -> None:
            super().__init__()
            shared = tnn.Linear(4, 4, bias=False)
            self.wte = tnn.Embedding(7, 4)
            self.blocks = tnn.ModuleList([Block(shared), Block(shared)])
            self.head = tnn.Linear(4, 7, bias=False)
            self.wte.weight = self.head.weight
            self.register_buffer("scale", torch_like.ones(4) * 0.5)
            self.register_parameter("unused", None)

    return Net()


def _names(net: Any) -> dict[str, Any]:
    return {
        "parameters": [n for n, _ in net.named_parameters()],
        "parameters, all": [n for n, _ in net.named_parameters(remove_duplicate=False)],
        "parameters, own": [n for n, _ in net.named_parameters(recurse=False)],
        "buffers": [n for n, _ in net.named_buffers()],
        "modules": [n for n, _ in net.named_modules()],
        "modules, all": [n for n, _ in net.named_modules(remove_duplicate=False)],
        "children": [n for n, _ in net.named_children()],
        "module types": [type(m).__name__ for m in net.modules()],
        "state_dict": list(net.state_dict()),
        "parameter count": len(list(net.parameters())),
    }


@pytest.mark.clause("ENG-NN-002")
def test_a_tree_with_tied_and_shared_parts_is_listed_as_torch_lists_it() -> None:
    """Inputs: one tree (tied weight, shared submodule, three kinds of buffer, a None
    parameter) built in torch and in ampref. Expected: named_parameters (deduplicated,
    all, own), named_buffers, named_modules (both ways), named_children, modules()' types
    and state_dict's keys equal torch's lists in order. Pass: equal dicts of lists."""
    torch = pytest.importorskip("torch")
    assert _names(_tree(ampref)) == _names(_tree(torch))


@pytest.mark.clause("ENG-NN-002")
def test_apply_visits_every_childs_subtree_before_the_module_itself_as_torch() -> None:
    """Inputs: the tree above; ``apply`` recording each visited module's type. Expected:
    torch's visiting order (a shared module visited under each parent). Pass: equal."""
    torch = pytest.importorskip("torch")
    orders: list[list[str]] = []
    for lib in (ampref, torch):
        seen: list[str] = []
        net = _tree(lib)
        assert net.apply(lambda m, seen=seen: seen.append(type(m).__name__)) is net
        orders.append(seen)
    assert orders[0] == orders[1]


@pytest.mark.clause("ENG-NN-002")
def test_a_tied_weight_is_one_parameter_whose_gradient_sums_both_uses() -> None:
    """Inputs: embedding weight tied to the output layer's, ids [0, 3, 5], a sum of the
    logits as loss. Expected: one parameter; its gradient equals the embedding use's
    gradient (ones at the looked-up rows, per dim: the output layer's input sums) plus
    the output layer's (column sums of the hidden states), exactly, as computed by an
    independent NumPy oracle in float64 (all values are small integers, exact). AdamW
    accepts the parameter list and steps once. Pass: bitwise equal."""
    ampref.manual_seed(0)
    emb, head = nn.Embedding(6, 3), nn.Linear(3, 6, bias=False)
    emb.weight = head.weight = nn.Parameter(np.arange(18, dtype=np.float32).reshape(6, 3)
                                            % 5 - 2)
    model = nn.ModuleList([emb, head])
    assert len(model.parameters()) == 1
    ids = ampref.tensor([0, 3, 5])
    head(emb(ids)).sum().backward()
    w = head.weight.numpy().astype(np.float64)
    hidden = w[[0, 3, 5]]
    expect = np.zeros_like(w)
    expect += hidden.sum(axis=0)                   # d(sum(h @ W^T))/dW: every row gets sum(h)
    np.add.at(expect, [0, 3, 5], w.sum(axis=0))  # d/dh = column sums of W, scattered
    assert_bitwise_equal(head.weight.grad, expect.astype(np.float32))
    ampref.optim.AdamW(model.parameters(), lr=0.1).step()


@pytest.mark.clause("ENG-NN-002", "ENG-NN-001")
def test_buffers_are_saved_loaded_and_rounded_as_torchs() -> None:
    """Inputs: the tree above; its state dict changed (mask flipped, scale 0.1) and
    loaded into a fresh tree; then to_format('bfloat16'). Expected: loaded buffers hold
    the new values (bool stays bool); the non-persistent buffer is not saved; after
    to_format the float buffer holds bf16(0.1) = 0x3dcd0000 as float32 and the bool
    buffer is unchanged. Pass: exact equality."""
    sd = _tree(ampref).state_dict()
    assert "blocks.0.steps" not in sd and sd["blocks.0.mask"].dtype == np.bool_
    sd["blocks.1.mask"] = ~sd["blocks.1.mask"]
    sd["scale"] = np.full(4, 0.1, dtype=np.float32)
    net = _tree(ampref)
    net.load_state_dict(sd)
    assert net.blocks[1].mask.tolist() == (~np.tri(3, dtype=bool)).tolist()
    net.to_format("bfloat16")
    assert net.scale.numpy().view(np.uint32).tolist() == [0x3DCD0000] * 4
    assert net.blocks[1].mask.dtype == "bool" and net.blocks[0].steps.dtype == "int64"
    with pytest.raises(ValueError, match=r"'blocks.0.mask' has dtype float32; the module's "
                                         r"buffer is bool"):
        net.load_state_dict({**sd, "blocks.0.mask": np.ones((3, 3), np.float32)})


@pytest.mark.clause("ENG-NN-002")
def test_requires_grad_false_freezes_every_parameter_and_the_optimizer_skips_them() -> None:
    """Inputs: Linear(2, 2) frozen with requires_grad_(False), a loss through it and an
    unfrozen scale. Expected: frozen weights keep grad None and their values after an SGD
    step; unfreezing with requires_grad_() sets the flag back. Pass: exact."""
    ampref.manual_seed(1)
    lin = nn.Linear(2, 2)
    before = lin.weight.numpy()
    assert lin.requires_grad_(False) is lin
    scale = nn.Parameter(np.array([2.0], np.float32))
    (lin(ampref.ones(1, 2)) * scale).sum().backward()
    ampref.optim.SGD([*lin.parameters(), scale], lr=0.5).step()
    assert lin.weight.grad is None and scale.grad is not None
    assert_bitwise_equal(lin.weight.numpy(), before)
    assert all(p.requires_grad for p in lin.requires_grad_().parameters())


@pytest.mark.clause("ENG-NN-002", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda m: m.register_buffer("a.b", ampref.ones(1)), ValueError, "without '.'"),
    (lambda m: m.register_buffer("", ampref.ones(1)), ValueError, "non-empty"),
    (lambda m: m.register_buffer(3, ampref.ones(1)), TypeError, "buffer name must be a str"),
    (lambda m: m.register_buffer("x", 3), TypeError, "cannot assign int as buffer 'x'"),
    (lambda m: m.register_buffer("weight", ampref.ones(1)), ValueError, "already exists"),
    (lambda m: m.register_buffer("train", ampref.ones(1)), ValueError, "already exists"),
    (lambda m: m.register_buffer("b", ampref.ones(1), persistent="no"), TypeError,
     "persistent"),
    (lambda m: m.register_parameter("q", ampref.ones(1)), TypeError,
     "cannot assign Tensor as parameter 'q'"),
    (lambda m: setattr(m, "weight", ampref.ones(2, 2)), TypeError,
     "cannot assign Tensor as parameter 'weight'"),
    (lambda m: m.apply(3), TypeError, "apply takes a function"),
    (lambda m: m.requires_grad_("no"), TypeError, "requires_grad"),
])
def test_bad_registrations_and_assignments_are_refused_naming_the_name(
        call: Any, error: type[Exception], match: str) -> None:
    """Inputs: one bad call each on a Linear. Expected: the error type named, with the
    name and the rule in its message (torch raises TypeError or KeyError for the same
    calls). Pass: raises with the message."""
    with pytest.raises(error, match=match):
        call(nn.Linear(2, 2))


@pytest.mark.clause("ENG-NN-002")
def test_assigning_none_or_a_new_tensor_to_registered_names_follows_torch() -> None:
    """Inputs: a buffer reassigned to a new tensor and then None, a parameter assigned
    None. Expected: the buffer entry follows the assignments (None is not saved), the
    parameter leaves named_parameters. Pass: exact lists."""
    m = nn.Linear(2, 2)
    m.register_buffer("b", ampref.ones(1))
    m.b = ampref.zeros(3)
    assert m.state_dict()["b"].tolist() == [0.0, 0.0, 0.0]
    m.b = None
    m.bias = None
    assert list(m.state_dict()) == ["weight"] and [n for n, _ in m.named_buffers()] == []
    assert [n for n, _ in m.named_parameters()] == ["weight"]
