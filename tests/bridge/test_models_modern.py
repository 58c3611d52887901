"""Whole models of current architectures under emulate with no op left to torch
(TRC-EMU-001): a Llama-style decoder (RMSNorm, rotary position codes computed in the
forward with sin/cos, SwiGLU MLP, grouped-query causal attention, weighted cross
entropy with ignored targets, clip_grad_norm_ by the max norm), a VGG/ConvNeXt-style
classifier (adaptive average pooling to 2 x 2, drop path with floor_, L1 weight
penalty) and an FPN-style segmenter (bilinear upsampling, reflection padding, per-pixel
cross entropy with class weights). One training step and one eval forward each under
CUDA bf16 autocast emulated; losses near torch's float32 losses."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

nn, TF = torch.nn, torch.nn.functional


class Llama(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, vocab: int = 50, dim: int = 32, heads: int = 4, kv: int = 2) -> None:
        super().__init__()
        self.heads, self.kv, self.hd = heads, kv, dim // heads
        self.emb = nn.Embedding(vocab, dim)
        self.n1, self.n2, self.nf = nn.RMSNorm(dim), nn.RMSNorm(dim), nn.RMSNorm(dim)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kvp = nn.Linear(dim, 2 * kv * self.hd, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate, self.up = nn.Linear(dim, 64, bias=False), nn.Linear(dim, 64, bias=False)
        self.down = nn.Linear(64, dim, bias=False)
        self.head = nn.Linear(dim, vocab, bias=False)

    def rotary(self, x: Any) -> Any:
        T, half = x.shape[-2], self.hd // 2
        freq = torch.exp2(-torch.arange(half, dtype=torch.float32) * (8.0 / half))
        ang = torch.arange(T, dtype=torch.float32)[:, None] * freq[None, :]
        cos, sin = torch.cos(ang), torch.sin(ang)
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], -1)

    def forward(self, ids: Any) -> Any:
        B, T = ids.shape
        x = self.emb(ids)
        h = self.n1(x)
        q = self.q(h).view(B, T, self.heads, self.hd).transpose(1, 2)
        k, v = self.kvp(h).view(B, T, 2, self.kv, self.hd).permute(2, 0, 3, 1, 4)
        o = TF.scaled_dot_product_attention(self.rotary(q), self.rotary(k), v, is_causal=True,
                                            enable_gqa=True)
        x = x + self.o(o.transpose(1, 2).reshape(B, T, -1))
        h = self.n2(x)
        x = x + self.down(TF.silu(self.gate(h)) * self.up(h))
        return self.head(self.nf(x))


class DropPath(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, p: float) -> None:
        super().__init__()
        self.keep = 1.0 - p

    def forward(self, x: Any) -> Any:
        if not self.training:
            return x
        mask = (self.keep + torch.rand(x.shape[0], 1, 1, 1)).floor_()
        return x.div(self.keep) * mask


class Block(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, c: int) -> None:
        super().__init__()
        self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
        self.norm = nn.GroupNorm(1, c)
        self.pw1, self.pw2 = nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, c, 1)
        self.drop = DropPath(0.25)

    def forward(self, x: Any) -> Any:
        return x + self.drop(self.pw2(TF.gelu(self.pw1(self.norm(self.dw(x))))))


class FPN(nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self, classes: int = 3) -> None:
        super().__init__()
        self.c1 = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 8, 3), nn.ReLU())
        self.c2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.lat = nn.Conv2d(16, 8, 1)
        self.head = nn.Conv2d(8, classes, 3, padding=1, padding_mode="reflect")

    def forward(self, x: Any) -> Any:
        a = self.c1(x)
        b = self.lat(self.c2(a))
        up = TF.interpolate(b, size=a.shape[-2:], mode="bilinear", align_corners=False)
        return self.head(a + up)


def _zoo(name: str) -> tuple[Any, Any, Any]:
    torch.manual_seed(0)
    if name == "llama":
        ids = torch.randint(0, 50, (2, 12))
        target = ids.roll(-1, 1)
        target[:, -1] = -100
        w = torch.rand(50) + 0.5
        return Llama(), ids, lambda y: TF.cross_entropy(y.float().reshape(-1, 50),
                                                        target.reshape(-1), weight=w)
    if name == "convnext":
        model = nn.Sequential(nn.Conv2d(3, 8, 4, stride=4), Block(8), Block(8),
                              nn.AdaptiveAvgPool2d((2, 2)), nn.Flatten(), nn.Linear(32, 5))
        labels = torch.tensor([0, 1, 2, 3])
        return model, torch.randn(4, 3, 16, 16), lambda y: TF.cross_entropy(y.float(), labels) \
            + 1e-4 * sum(torch.linalg.vector_norm(p, 1) for p in model.parameters())
    t = torch.randint(0, 3, (2, 12, 12))
    t[:, 0, :] = 255
    w = torch.tensor([0.5, 1.0, 2.0])
    return FPN(), torch.randn(2, 3, 12, 12), lambda y: TF.cross_entropy(
        y.float(), t, weight=w, ignore_index=255)


@pytest.mark.clause("TRC-EMU-001", "TRC-NN-002", "TRC-NN-009", "TRC-IDX-001", "TRC-NN-003",
                    "TRC-RED-001")
@pytest.mark.parametrize("name", ["llama", "convnext", "fpn"])
def test_current_architectures_train_and_evaluate_under_bf16_autocast_fully_emulated(
        name: str) -> None:
    """Inputs: ``name``'s model, input and loss (module docstring), one SGD step with
    gradient clipping by the max norm and one eval-mode forward, under emulate(model,
    fallback='error') with ampref.torch.autocast('cuda', bfloat16). Expected: no
    UnsupportedOpError, every op emulated or exact, finite losses, the step's loss within
    5 % of torch's float32 loss (bf16 compute), every parameter given a gradient.
    Pass: all."""
    model, x, loss_fn = _zoo(name)
    model.train()
    torch.manual_seed(1)
    want = float(loss_fn(model(x)).detach())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    torch.manual_seed(1)  # the same drop-path draws as torch's run
    with at.emulate(model, fallback="error") as em:
        with at.autocast("cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, norm_type=math.inf)
        grads = [p.grad is not None for p in model.parameters()]
        opt.step()
        model.eval()
        with torch.no_grad(), at.autocast("cuda", dtype=torch.bfloat16):
            evaluated = float(loss_fn(model(x)))
    assert em.report.not_emulated() == []
    got = float(loss.detach())
    assert np.isfinite(got) and np.isfinite(evaluated)
    assert abs(got - want) <= 0.05 * abs(want), (got, want)
    assert all(grads)
