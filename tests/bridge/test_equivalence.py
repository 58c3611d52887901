"""A torch model under ampref.torch.emulate against the same model in ampref's engine:
same weights, same data, N training steps, bit for bit where the two define the same
rounded operations (TRC-EQV-001..003): forward, loss, backward and SGD updates, under
fp32, amp-bf16 and amp-fp16 with the torch-profile loss scaler."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref import functional as F
from ampref import nn, optim
from ampref.testing import assert_bitwise_equal

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")


class TorchBlock(torch.nn.Module):  # type: ignore[misc,name-defined]
    """The engine's TransformerBlock written as a torch user writes it."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.attn = torch.nn.Module()
        self.attn.qkv, self.attn.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))

    def forward(self, x: Any) -> Any:
        B, T, D = x.shape
        h = self.ln1(x)
        qkv = self.attn.qkv(h).reshape(B, T, 3, self.heads, D // self.heads)
        q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.attn.proj(o.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


def _copy_weights(engine_model: Any, torch_model: Any) -> None:
    params = dict(torch_model.named_parameters())
    for name, p in engine_model.named_parameters():
        with torch.no_grad():
            params[name].copy_(torch.from_numpy(np.array(p.data)))


def _models(kind: str) -> tuple[Any, Any]:
    eng: Any
    if kind == "mlp":
        eng = nn.MLP([12, 32, 5], "gelu", seed=3)
        tor = torch.nn.Sequential(torch.nn.Linear(12, 32), torch.nn.GELU(),
                                  torch.nn.Linear(32, 5))
    else:
        eng = nn.TransformerBlock(16, 2, seed=4)
        tor = TorchBlock(16, 2)
    _copy_weights(eng, tor)
    return eng, tor


#: a power of two: torch's SGD update fma(-lr, g, w) (one rounding, TRC-PWO-001) then
#: equals the engine's fl(w - fl(lr g)), lr g being exact; at lr = 0.05 they differ
LR = 2.0**-4


def _data(kind: str) -> tuple[Any, Any]:
    rng = np.random.default_rng(7)
    if kind == "mlp":
        return rng.standard_normal((24, 12)).astype(np.float32), rng.integers(0, 5, 24)
    return rng.standard_normal((3, 8, 16)).astype(np.float32), rng.integers(0, 16, 24)


def _engine_run(kind: str, mode: str, steps: int) -> tuple[list[float], dict[str, Any], Any]:
    eng, _ = _models(kind)
    x, y = _data(kind)
    opt = optim.SGD(eng.parameters(), lr=LR, momentum=0.9)
    # a scale that overflows fp16 gradients at first: skipped steps, backoffs, then growth
    scaler = (ampref.amp.GradScaler("cpu", init_scale=2.0**30, growth_interval=2)
              if mode == "amp-fp16" else None)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with ampref.autocast("cpu", {"amp-fp16": "float16"}.get(mode, "bfloat16"),
                             enabled=mode != "fp32"):
            out = eng(ampref.tensor(x))
            loss = F.cross_entropy(F.reshape(out, (-1, out.shape[-1])), y)
        losses.append(float(np.asarray(loss.data)))
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
    return losses, {n: np.array(p.data) for n, p in eng.named_parameters()}, scaler


def _torch_run(kind: str, mode: str, steps: int) -> tuple[list[float], dict[str, Any], Any]:
    _, tor = _models(kind)
    x, y = _data(kind)
    opt = torch.optim.SGD(tor.parameters(), lr=LR, momentum=0.9)
    scaler = (torch.amp.GradScaler("cpu", init_scale=2.0**30, growth_interval=2)
              if mode == "amp-fp16" else None)
    dtype = torch.float16 if mode == "amp-fp16" else torch.bfloat16
    losses = []
    with at.emulate(tor, fallback="error"):
        for _ in range(steps):
            opt.zero_grad()
            with torch.autocast("cpu", dtype, enabled=mode != "fp32"):
                out = tor(torch.from_numpy(x))
                loss = torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]),
                                                         torch.from_numpy(y))
            losses.append(float(loss.item()))
            if scaler is not None:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()
    return losses, {n: p.detach().numpy().copy() for n, p in tor.named_parameters()}, scaler


def _assert_same_run(kind: str, torch_run: Any, engine_run: Any) -> None:
    """Losses and every final weight of the two runs equal bit for bit (hex on failure)."""
    (tl, tw, _), (el, ew, _) = torch_run, engine_run
    assert_bitwise_equal(np.array(tl, np.float32), np.array(el, np.float32),
                         msg=f"{kind} losses")
    for name in ew:
        assert_bitwise_equal(tw[name], ew[name], msg=f"{kind} {name}")


@pytest.mark.clause("TRC-EQV-001")
@pytest.mark.parametrize("kind", ["mlp", "block"])
def test_fp32_training_under_emulate_equals_the_engine_bit_for_bit(kind: str) -> None:
    """Inputs: four fp32 training steps of an MLP and a transformer block in torch under
    emulate and in the engine. Expected: identical losses, weights and scaler states. Pass:
    bitwise equal."""
    _assert_same_run(kind, _torch_run(kind, "fp32", 4), _engine_run(kind, "fp32", 4))


@pytest.mark.clause("TRC-EQV-002")
@pytest.mark.parametrize("kind", ["mlp", "block"])
def test_bf16_autocast_training_under_emulate_equals_the_engine(kind: str) -> None:
    """Inputs: three bf16-autocast steps of both models. Expected: identical runs. Pass:
    bitwise equal."""
    _assert_same_run(kind, _torch_run(kind, "amp-bf16", 3), _engine_run(kind, "amp-bf16", 3))


@pytest.mark.clause("TRC-EQV-003", "TRC-PWO-002")
def test_fp16_autocast_with_torchs_gradscaler_equals_the_engine_and_its_scaler() -> None:
    """Inputs: eight fp16-autocast steps with torch's GradScaler under emulate and the
    engine's scaler. Expected: identical runs, equal final scales below 2^30, skipped steps
    present. Pass: all."""
    el, ew, es = _engine_run("mlp", "amp-fp16", 8)
    tl, tw, ts = _torch_run("mlp", "amp-fp16", 8)
    _assert_same_run("mlp", (tl, tw, ts), (el, ew, es))
    assert ts.get_scale() == es.get_scale() < 2.0**30  # overflowed, backed off, regrew
    assert es.loss_scaler.skipped_steps()


@pytest.mark.clause("TRC-EQV-004")
def test_an_adamw_step_is_not_claimed_equal_but_differs_by_a_few_ulps_of_the_update() -> None:
    """Inputs: one AdamW step from the same gradients in the engine and in torch under
    emulate. Expected: each weight within 4 ulps (2^-24 relative) of the largest possible
    update lr/sqrt(1 - b2). Pass: within the bound."""
    # torch's AdamW (lerp_, addcmul_, addcdiv_) and the engine's Adam formula round
    # differently: after one step from the same gradients, each weight differs by at
    # most 4 ulps of the largest update (lr * |m/(sqrt(v) + eps)| <= lr * 1/sqrt(1 - b2)
    # at step 1)
    eng, tor = _models("mlp")
    x, y = _data("mlp")
    eo, to = optim.AdamW(eng.parameters(), lr=1e-2), torch.optim.AdamW(tor.parameters(), lr=1e-2)
    F.cross_entropy(eng(ampref.tensor(x)), y).backward()
    eo.step()
    with at.emulate(tor):
        torch.nn.functional.cross_entropy(tor(torch.from_numpy(x)), torch.from_numpy(y)).backward()
        to.step()
    tw = dict(tor.named_parameters())
    bound = 4 * 1e-2 / np.sqrt(1 - 0.999) * 2.0**-24
    for name, p in eng.named_parameters():
        diff = np.abs(np.array(p.data, np.float64) - tw[name].detach().numpy())
        assert diff.max() <= bound, (name, diff.max(), bound)
