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


class InvertedResidual(torch.nn.Module):  # type: ignore[misc,name-defined]
    """MobileNetV2's block: expand, depthwise 3x3, project; ReLU6 in place; residual."""

    def __init__(self, c: int, expand: int = 4) -> None:
        super().__init__()
        e = c * expand
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(c, e, 1, bias=False), torch.nn.BatchNorm2d(e),
            torch.nn.ReLU6(inplace=True),
            torch.nn.Conv2d(e, e, 3, padding=1, groups=e, bias=False), torch.nn.BatchNorm2d(e),
            torch.nn.ReLU6(inplace=True), torch.nn.Conv2d(e, c, 1, bias=False),
            torch.nn.BatchNorm2d(c))

    def forward(self, x: Any) -> Any:
        return x + self.body(x)


class UNet(torch.nn.Module):  # type: ignore[misc,name-defined]
    """A one-level U-Net: group norm and SiLU down, batch norm and leaky ReLU below, a
    transposed-convolution and a nearest upsampling path up, skip concatenation."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.down = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16),
                                 nn.LeakyReLU(0.1, inplace=True))
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
        self.up2 = nn.Sequential(nn.Upsample(scale_factor=2), nn.Conv2d(16, 8, 1))
        self.out = nn.Conv2d(24, 1, 1)

    def forward(self, x: Any) -> Any:
        a = self.down(x)
        b = self.mid(self.pool(a))
        return self.out(torch.cat([a, self.up(b), self.up2(b)], 1))


def _zoo(name: str) -> tuple[Any, Any, Any]:
    """(model, input, loss) of the architectures below, seeded."""
    torch.manual_seed(0)
    nn = torch.nn
    if name == "mobilenet":
        model = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8),
                              nn.Hardswish(inplace=True), InvertedResidual(8),
                              InvertedResidual(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                              nn.Dropout(0.2), nn.Linear(8, 10))
        labels = torch.tensor([1, 2, 3, 4])
        return model, torch.randn(4, 3, 16, 16), lambda y: nn.functional.cross_entropy(
            y.float(), labels, label_smoothing=0.1)
    if name == "unet":
        mask = (torch.rand(2, 1, 16, 16) > 0.5).float()
        return UNet(), torch.randn(2, 3, 16, 16), \
            lambda y: nn.functional.binary_cross_entropy_with_logits(y.float(), mask)
    model = nn.Sequential(*[m for d in (1, 2, 4) for m in (
        nn.Conv1d(4, 4, 3, dilation=d, padding=d), nn.ELU())])
    return model, torch.randn(2, 4, 20), \
        lambda y: nn.functional.smooth_l1_loss(y.float(), torch.zeros(2, 4, 20))


@pytest.mark.clause("TRC-EMU-001", "TRC-ACT-001", "TRC-NN-006", "TRC-NN-008", "TRC-NRM-005")
@pytest.mark.parametrize("name", ["mobilenet", "unet", "dilated tcn"])
def test_cnn_families_train_and_evaluate_under_cuda_autocast_with_every_op_emulated(
        name: str) -> None:
    """Inputs: a MobileNetV2-style net (depthwise convolutions, ReLU6 and Hardswish in
    place, label-smoothed cross entropy), a U-Net (transposed convolution, nearest
    upsampling, leaky ReLU, BCE with logits) and a dilated Conv1d stack with ELU (smooth
    L1), one training step and one eval-mode forward each, under emulate(model,
    fallback='error') with ampref.torch.autocast('cuda', float16). Expected: no
    UnsupportedOpError, every op emulated, finite losses within 5% of torch's float32
    losses (fp16 compute). Pass: all."""
    model, x, loss_fn = _zoo(name)
    want = float(loss_fn(model(x)).detach())
    with at.emulate(model, fallback="error") as em:
        with at.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x))
        loss.backward()
        model.eval()
        with torch.no_grad(), at.autocast("cuda", dtype=torch.float16):
            evaluated = float(loss_fn(model(x)))
    assert em.report.not_emulated() == []
    got = float(loss.detach())
    assert np.isfinite(got) and np.isfinite(evaluated)
    assert abs(got - want) <= 0.05 * abs(want), (got, want)
    assert all(p.grad is not None for p in model.parameters())
