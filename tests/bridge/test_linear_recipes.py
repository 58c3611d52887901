"""Training recipes for torch's linear layers under emulate (TRC-REC-001): each recipe's
forward output and the input, weight and bias gradients equal the engine's recipe linear
bit for bit; a recipe MLP trains; bad recipes and profiles are refused with the choices."""

from __future__ import annotations

import numpy as np
import pytest

import ampref
from ampref import functional as F
from ampref.engine.functional.quantized import quantized_linear
from ampref.recipes.roles import GEMM_RECIPES
from ampref.testing import assert_bitwise_equal

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")


@pytest.mark.clause("TRC-REC-001")
@pytest.mark.parametrize("recipe", sorted(GEMM_RECIPES))
@pytest.mark.parametrize("profile", ["te", "torchao"])
def test_a_linear_under_a_recipe_equals_the_engines_recipe_linear(recipe: str,
                                                                  profile: str) -> None:
    """Inputs: a 128 -> 32 Linear on 16 inputs under emulate(recipe=...,
    recipe_profile=te/torchao), loss sum(y^2) backward. Expected: output and input, weight,
    bias gradients equal the engine's quantized_linear (torchao without fp8-delayed
    refused). Pass: bitwise equal."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(128, 32)
    x = torch.randn(16, 128, requires_grad=True)
    if recipe == "fp8-delayed" and profile == "torchao":  # a combination torchao lacks
        with pytest.raises(ValueError, match="does not implement recipe 'fp8_delayed'"):
            with at.emulate(recipe=recipe, recipe_profile=profile):
                lin(x)
        return
    with at.emulate(recipe=recipe, recipe_profile=profile, seed=10):
        y = lin(x)
        (y * y).sum().backward()
    ex, ew, eb = (ampref.tensor(t.detach().numpy(), requires_grad=True)
                  for t in (x, lin.weight, lin.bias))
    ey = quantized_linear(ex, ew, eb, recipe=recipe, profile=profile, seed=11)
    F.sum(F.mul(ey, ey)).backward()
    assert_bitwise_equal(y.detach().numpy(), ey.numpy(), msg=f"{recipe} forward: ")
    for name, t, e in (("x", x, ex), ("weight", lin.weight, ew), ("bias", lin.bias, eb)):
        assert t.grad is not None
        assert_bitwise_equal(t.grad.numpy(), np.asarray(e.grad), msg=f"{recipe} {name}: ")


@pytest.mark.clause("TRC-REC-001")
def test_an_mlp_trains_under_nvfp4() -> None:
    """Inputs: a 32-64-4 MLP, five SGD steps under emulate(recipe='nvfp4'). Expected: a
    falling loss and every op emulated. Pass: both."""
    torch.manual_seed(1)
    mlp = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(mlp.parameters(), lr=0.1)
    x, y = torch.randn(64, 32), torch.randint(0, 4, (64,))
    losses = []
    with at.emulate(mlp, recipe="nvfp4") as em:
        for _ in range(5):
            loss = torch.nn.functional.cross_entropy(mlp(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert losses[-1] < losses[0] and em.report.not_emulated() == []


@pytest.mark.clause("TRC-EMU-003")
def test_an_unknown_recipe_or_profile_is_refused_with_the_choices() -> None:
    """Inputs: recipe 'fp4'; recipe_profile 'ocp'. Expected: ValueError listing the
    choices. Pass: both."""
    with pytest.raises(ValueError, match="unknown GEMM recipe 'fp4'; choose one of.*nvfp4"):
        at.emulate(recipe="fp4")
    with pytest.raises(ValueError, match="recipe_profile must be one of te, torchao, got 'ocp'"):
        at.emulate(recipe="mxfp8", recipe_profile="ocp")


@pytest.mark.clause("TRC-EMU-003")
@pytest.mark.parametrize("recipe", [None, "nvfp4"])
@pytest.mark.parametrize("kw,error,msg", [
    ({"recipe_profile": "ocp"}, ValueError, "recipe_profile must be one of te, torchao"),
    ({"recipe_profile": None}, ValueError, "recipe_profile must be one of te, torchao, got None"),
    ({"seed": -1}, ValueError, r"emulate: seed must be in \[0, 2\*\*64\), got -1"),
    ({"seed": 2**64}, ValueError, r"emulate: seed must be in \[0, 2\*\*64\)"),
    ({"seed": 1.5}, TypeError, "emulate: seed must be an int in .*got float"),
    ({"seed": True}, TypeError, "emulate: seed must be an int in .*got bool"),
    ({"seed": "1"}, TypeError, "emulate: seed must be an int in .*got str"),
])
def test_a_bad_profile_or_seed_is_refused_with_or_without_a_recipe(
        recipe: str | None, kw: dict[str, object], error: type[Exception], msg: str) -> None:
    """Inputs: emulate() with no recipe and with nvfp4, and one of: an unknown or missing
    recipe_profile, a seed below 0 or at 2^64, a float, bool or str seed. Expected: the
    listed error naming the value on construction, also where no recipe would use it
    (these were accepted silently then). Pass: each."""
    with pytest.raises(error, match=msg):
        at.emulate(recipe=recipe, **kw)  # type: ignore[arg-type]
