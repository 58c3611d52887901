"""Whole models a user wrote, trained under emulate with no op left to torch (TRC-EMU-001):
a GPT-style transformer (embedding, learned positions, weight tying, causal attention,
GELU MLP, dropout, cross_entropy with ignore_index, clip_grad_norm_, AdamW) in fp32 and
under bf16 autocast, and a CNN (conv, batch norm, group norm, SiLU, max pooling,
adaptive average pooling); runs repeat bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")


class GPT(torch.nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, vocab: int = 65, dim: int = 32, heads: int = 4, ctx: int = 16) -> None:
        super().__init__()
        self.heads = heads
        self.emb = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.zeros(ctx, dim))
        self.ln1, self.ln2, self.lnf = (torch.nn.LayerNorm(dim) for _ in range(3))
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.fc, self.out = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)
        self.drop = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(dim, vocab, bias=False)
        self.head.weight = self.emb.weight  # weight tying

    def forward(self, ids: Any) -> Any:
        B, T = ids.shape
        x = self.emb(ids) + self.pos[:T]
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(o.transpose(1, 2).reshape(B, T, -1)))
        x = x + self.out(torch.nn.functional.gelu(self.fc(self.ln2(x))))
        return self.head(self.lnf(x))


def _train_gpt(autocast: bool) -> tuple[list[float], Any]:
    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 65, (4, 17))
    targets = ids[:, 1:].clone()
    targets[0, :3] = -1  # padding, ignored by the loss
    losses = []
    with at.emulate(model, fallback="torch") as em:
        for _ in range(3):
            with torch.autocast("cpu", torch.bfloat16, enabled=autocast):
                logits = model(ids[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, 65),
                                                         targets.reshape(-1), ignore_index=-1)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert em.report.not_emulated() == []
    return losses, model.state_dict()


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("autocast", [False, True], ids=["fp32", "amp-bf16"])
def test_a_gpt_style_model_trains_with_every_floating_op_emulated(autocast: bool) -> None:
    """Inputs: a small GPT-style model trained twice under emulate, fp32 and bf16 autocast.
    Expected: finite falling losses, identical across the two runs with identical weights.
    Pass: all."""
    losses, state = _train_gpt(autocast)
    again, state2 = _train_gpt(autocast)
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    assert losses == again
    for k in state:
        assert torch.equal(state[k], state2[k]), k


@pytest.mark.clause("TRC-EMU-001", "TRC-NRM-001")
def test_a_cnn_trains_with_every_floating_op_emulated() -> None:
    """Inputs: a CNN with batch norm, max-pool, group norm, SiLU, adaptive pooling; three
    SGD steps under emulate. Expected: no op left to torch, finite falling losses, the
    convolution and norm ops among the emulated. Pass: all."""
    torch.manual_seed(0)
    cnn = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Conv2d(8, 8, 3), torch.nn.GroupNorm(2, 8),
        torch.nn.SiLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 10))
    opt = torch.optim.SGD(cnn.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.randn(4, 3, 16, 16), torch.tensor([1, 2, 3, 4])
    losses = []
    with at.emulate(cnn, fallback="torch") as em:
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(cnn(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            losses.append(loss.item())
    assert em.report.not_emulated() == []
    assert all(np.isfinite(losses)) and losses[-1] < losses[0]
    ops = {r.op for r in em.report.rows()}
    assert {"convolution", "native_batch_norm", "native_group_norm_backward", "silu"} <= ops
