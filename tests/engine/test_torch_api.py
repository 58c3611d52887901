"""ampref's public call shapes against torch's, with the intended differences listed in
docs/torch-api-differences.md (runs when torch is installed)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref import amp, nn, optim
from torch_signatures import ampref_params, differences, torch_params
from paths import ROOT

torch = pytest.importorskip("torch")
DOC = ROOT / "docs" / "torch-api-differences.md"
MODULE_METHODS = ("zero_grad", "register_buffer", "register_parameter", "named_modules",
                  "modules", "named_children", "children", "named_parameters", "parameters",
                  "named_buffers", "buffers", "apply", "requires_grad_", "train", "eval",
                  "state_dict", "load_state_dict")


def _objects() -> Iterator[tuple[str, Any, Any, str, bool]]:
    """(label, ampref object, torch object or None, torch name, torch is a Tensor method)."""
    for name in F.__all__:
        if name == "masked_fill":  # torch has it as a Tensor method only
            yield f"functional.{name}", getattr(F, name), torch.Tensor.masked_fill, name, True
            continue
        theirs = getattr(torch.nn.functional, name, None) or getattr(torch, name, None)
        yield f"functional.{name}", getattr(F, name), theirs, name, False
    for name in nn.__all__:
        if name not in ("utils", "init", "Parameter", "Module"):
            yield f"nn.{name}", getattr(nn, name), getattr(torch.nn, name, None), name, False
    yield ("nn.utils.clip_grad_norm_", nn.utils.clip_grad_norm_, torch.nn.utils.clip_grad_norm_,
           "clip_grad_norm_", False)
    for name in ("SGD", "Adam", "AdamW"):
        yield f"optim.{name}", getattr(optim, name), getattr(torch.optim, name), name, False
    yield ("optim.Optimizer.zero_grad", optim.Optimizer.zero_grad, torch.optim.Optimizer.zero_grad,
           "zero_grad", False)
    for m in MODULE_METHODS:
        yield f"nn.Module.{m}", getattr(nn.Module, m), getattr(torch.nn.Module, m), m, False
    for name in nn.init.__all__:
        yield f"nn.init.{name}", getattr(nn.init, name), getattr(torch.nn.init, name), name, False
    yield "amp.GradScaler", amp.GradScaler, torch.amp.GradScaler, "GradScaler", False
    for m in ("scale", "unscale_", "step", "update", "get_scale", "state_dict", "load_state_dict"):
        yield (f"amp.GradScaler.{m}", getattr(amp.GradScaler, m), getattr(torch.amp.GradScaler, m),
               m, False)
    yield "autocast", ampref.autocast, torch.autocast, "autocast", False
    for m in ("sum", "mean", "transpose"):
        yield f"Tensor.{m}", getattr(ampref.Tensor, m), getattr(torch.Tensor, m), m, False


def _documented() -> set[tuple[str, str, str]]:
    rows = set()
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = re.match(r"\| `([\w.]+)` \| ([\w-]+) \| `([\w-]+)` \|", line)
        if m:
            rows.add((m[1], m[2], m[3]))
    return rows


def _actual() -> tuple[set[tuple[str, str, str]], list[str]]:
    found: set[tuple[str, str, str]] = set()
    errors: list[str] = []
    for label, ours, theirs, name, method in _objects():
        if theirs is None:
            found.add((label, "ampref-only", "-"))
            continue
        d, e = differences(label, ampref_params(ours),
                           torch_params(theirs, name, tensor_method=method))
        found |= d
        errors += e
    return found, errors


@pytest.mark.clause("API-TCH-001")
def test_positional_parameters_are_a_prefix_of_torchs_and_extras_are_keyword_only() -> None:
    """Inputs: every public ampref callable with a torch counterpart, both signatures.
    Expected: ampref's positional parameters are a prefix of torch's and its extras
    keyword-only. Pass: no error."""
    _, errors = _actual()
    assert errors == []


@pytest.mark.clause("API-TCH-001")
def test_every_difference_from_torch_is_documented_and_every_documented_one_exists() -> None:
    """Inputs: the found signature differences and those listed in docs/torch-api-
    differences.md (more than 50). Expected: the two sets equal. Pass: nothing
    undocumented, nothing stale."""
    found, _ = _actual()
    documented = _documented()
    assert len(documented) > 50
    assert sorted(found - documented) == [], "undocumented differences from torch"
    assert sorted(documented - found) == [], "documented differences that no longer exist"


@pytest.mark.clause("API-TCH-001")
def test_the_comparison_catches_a_swapped_positional_order() -> None:
    """Inputs: an old SGD(params, lr, momentum, weight_decay) signature against torch's.
    Expected: an error saying it is not a prefix. Pass: reported."""
    # the old optim.SGD(params, lr, momentum, weight_decay, ...) order, which bound a torch
    # user's positional dampening to weight_decay
    def old_sgd(params: Any, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        """stand-in"""

    _, errors = differences("optim.SGD", ampref_params(old_sgd),
                            torch_params(torch.optim.SGD, "SGD"))
    assert errors and "not a prefix" in errors[0]


_CREATIONS: dict[str, Any] = {
    "tensor": lambda m, **kw: m.tensor([1.0, 2.0], **kw),
    "tensor of ints": lambda m, **kw: m.tensor([1, 2], **kw),
    "zeros": lambda m, **kw: m.zeros(2, 3, **kw),
    "ones": lambda m, **kw: m.ones(2, 3, **kw),
    "full": lambda m, **kw: m.full((2,), 1.5, **kw),
    "full of an int": lambda m, **kw: m.full((2,), 3, **kw),
    "rand": lambda m, **kw: m.rand(2, **kw),
    "randn": lambda m, **kw: m.randn(2, **kw),
    "zeros_like": lambda m, **kw: m.zeros_like(m.ones(2), **kw),
    "ones_like": lambda m, **kw: m.ones_like(m.ones(2), **kw),
    "arange of floats": lambda m, **kw: m.arange(0.0, 3.0, **kw),
    "arange of ints": lambda m, **kw: m.arange(3, **kw),
    "randint": lambda m, **kw: m.randint(0, 5, (3,), **kw),
}


@pytest.mark.clause("ENG-TEN-002")
@pytest.mark.parametrize("name", sorted(_CREATIONS))
def test_creation_functions_default_to_torchs_dtype_and_no_gradient(name: str) -> None:
    """Inputs: each creation call with no ``dtype`` or ``requires_grad``, in ampref and in
    torch (the oracle). Expected: the same dtype name, shape and ``requires_grad`` (an
    integer tensor, which has no gradient, counts as False). Pass: all three equal."""
    ours, theirs = _CREATIONS[name](ampref), _CREATIONS[name](torch)
    assert (str(ours.dtype), tuple(ours.shape), getattr(ours, "requires_grad", False)) == (
        str(theirs.dtype).removeprefix("torch."), tuple(theirs.shape), theirs.requires_grad)


@pytest.mark.clause("ENG-TEN-002")
@pytest.mark.parametrize("name", ["tensor", "zeros", "ones", "full", "rand", "randn",
                                  "zeros_like", "ones_like", "arange of floats"])
def test_float_creation_functions_require_a_gradient_when_asked(name: str) -> None:
    """Inputs: each float creation call with ``requires_grad=True``, ampref and torch.
    Expected: both tensors require a gradient. Pass: equal (True)."""
    ours = _CREATIONS[name](ampref, requires_grad=True)
    theirs = _CREATIONS[name](torch, requires_grad=True)
    assert ours.requires_grad is theirs.requires_grad is True


@pytest.mark.clause("ENG-PRM-001")
@pytest.mark.parametrize("fmt,v,once", [("float16", 1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-10),
                                        ("bfloat16", 1 + 2.0**-8 + 2.0**-40, 1 + 2.0**-7)])
def test_the_documented_16_bit_conversion_difference_is_exactly_as_documented(
        fmt: str, v: float, once: float) -> None:
    """Inputs: a float64 value a hair above a 16-bit tie (``v``: float32 rounds it onto
    the tie, which goes to even, 1.0). Expected (docs/torch-api-differences.md,
    "Making a 16-bit tensor"): ``ampref.tensor([v], fmt)`` and a float64 tensor's cast
    are the single rounding ``once`` (the nearest 16-bit value, from the exact value);
    torch's ``tensor``/``.to`` give 1.0; rounding to float32 first, or adding ``v`` as a
    weak scalar to a zero tensor, gives torch's 1.0 in ampref too. Pass: all equal."""
    dt = getattr(torch, fmt)
    assert ampref.tensor([v], fmt).tolist() == [once]
    assert ampref.tensor([v], "float64").to(fmt).tolist() == [once]
    assert torch.tensor([v], dtype=dt).tolist() == [1.0]
    assert torch.tensor([v], dtype=torch.float64).to(dt).tolist() == [1.0]
    assert ampref.tensor(np.array([v], np.float32), fmt).tolist() == [1.0]
    assert (ampref.zeros(1, dtype=fmt) + v).tolist() == (torch.zeros(1, dtype=dt) + v).tolist()
