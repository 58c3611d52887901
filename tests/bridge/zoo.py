"""Whole torch models written the way public training scripts write them, for the
bridge's dtype and coverage tests: an MLP, a CNN with batch norm, a torchvision-style
ResNet (overlapping max pool, bias-free convs, projection shortcut), an ``nn.TransformerEncoder``
language model with a causal mask, a GPT with a ``masked_fill(-inf)`` mask and manual
attention, an LSTM and a GRU language model, and a weight-normed triplet-loss embedding
net. Each ``case`` gives the model, its inputs and the loss of one training step."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

VOCAB, CTX = 37, 12


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(),
                                 nn.Linear(32, 5))

    def forward(self, x: Any) -> Any:
        return self.net(x)


class CNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.MaxPool2d(2), nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(16, 10)

    def forward(self, x: Any) -> Any:
        return self.classifier(torch.flatten(self.features(x), 1))


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 convs without bias, batch norm, a 1x1
    strided projection on the shortcut where the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.downsample: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: Any) -> Any:
        out = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(out)) + self.downsample(x))


class ResNet(nn.Module):
    """torchvision's ResNet layout in miniature: 7x7 stride-2 stem, 3x3 stride-2 max pool
    (overlapping windows), two stages, adaptive average pool, linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(8, 8, 1)
        self.layer2 = BasicBlock(8, 16, 2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x: Any) -> Any:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer2(self.layer1(x))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class TransformerLM(nn.Module):
    """The word-language-model shape: embedding scaled by sqrt(d), sinusoidal positions,
    nn.TransformerEncoder with a causal mask (float -inf above the diagonal)."""

    def __init__(self, d: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.d = d
        self.emb = nn.Embedding(VOCAB, d)
        pos = torch.arange(CTX).unsqueeze(1)
        div = torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        pe = torch.zeros(CTX, d)
        pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * div), torch.cos(pos * div)
        self.register_buffer("pe", pe)
        layer = nn.TransformerEncoderLayer(d, heads, 64, dropout=0.1, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, ids: Any) -> Any:
        mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
        pe: Any = self.pe
        x = self.emb(ids) * math.sqrt(self.d) + pe[:ids.shape[1]]
        return self.head(self.encoder(x, mask=mask, is_causal=True))


class Block(nn.Module):
    """minGPT's block: manual attention with a registered tril buffer and masked_fill."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d),
                                 nn.Dropout(0.1))
        self.register_buffer("bias", torch.tril(torch.ones(CTX, CTX)).view(1, 1, CTX, CTX))

    def forward(self, x: Any) -> Any:
        B, T, C = x.size()
        q, k, v = self.attn(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        tril: Any = self.bias
        att = att.masked_fill(tril[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, d), nn.Embedding(CTX, d)
        self.drop = nn.Dropout(0.1)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, VOCAB, bias=False)

    def forward(self, ids: Any) -> Any:
        pos = torch.arange(0, ids.shape[1], dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.drop(self.wte(ids) + self.wpe(pos))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))


class RNNLM(nn.Module):
    """The word-language-model RNN: embedding, dropout, a 2-layer LSTM or GRU, decoder."""

    def __init__(self, kind: str, d: int = 24) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, d)
        self.drop = nn.Dropout(0.2)
        self.rnn = getattr(nn, kind)(d, d, 2, dropout=0.2, batch_first=True)
        self.decoder = nn.Linear(d, VOCAB)

    def forward(self, ids: Any) -> Any:
        out, _ = self.rnn(self.drop(self.emb(ids)))
        return self.decoder(self.drop(out))


class Metric(nn.Module):
    """A triplet-loss embedding net (verification models): a weight-normed projection,
    1-d convolution, L2-normalised embeddings; anchors, positives and negatives stacked
    on the first dimension."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 8, 3, padding=1))
        self.proj = nn.utils.parametrizations.weight_norm(nn.Linear(8 * 10, 16))

    def forward(self, x: Any) -> Any:
        h = F.gelu(self.conv(x.flatten(0, 1)))
        return F.normalize(self.proj(h.flatten(1)), dim=-1).unflatten(0, (3, -1))


def _triplet(out: Any) -> Any:
    return F.triplet_margin_loss(out[0], out[1], out[2], margin=0.5)


@dataclass(frozen=True)
class Case:
    name: str
    model: nn.Module
    inputs: Any
    loss: Callable[[Any], Any]


def _ce(target: Any, flat: bool = False) -> Callable[[Any], Any]:
    """Cross entropy against ``target``, moved to the logits' device (the same loss on
    the CPU and on a GPU, scripts/gpu_records.py)."""
    def loss(out: Any) -> Any:
        t = target.to(out.device)
        return F.cross_entropy(out.reshape(-1, VOCAB), t.reshape(-1)) if flat else \
            F.cross_entropy(out, t)
    return loss


def case(name: str) -> Case:
    """A fresh model with seeded weights and one batch (the same for a name)."""
    torch.manual_seed(0)
    if name == "mlp":
        y = torch.randint(0, 5, (8,))
        return Case(name, MLP(), torch.randn(8, 16), _ce(y))
    if name == "cnn":
        y = torch.randint(0, 10, (4,))
        return Case(name, CNN(), torch.randn(4, 3, 8, 8), _ce(y))
    if name == "metric":
        return Case(name, Metric(), torch.randn(3, 4, 4, 10), _triplet)
    if name == "resnet":
        y = torch.randint(0, 10, (2,))
        return Case(name, ResNet(), torch.randn(2, 3, 32, 32), _ce(y))
    ids = torch.randint(0, VOCAB, (3, CTX + 1))
    models: dict[str, Callable[[], nn.Module]] = {"transformer": TransformerLM, "gpt": GPT,
              "lstm": lambda: RNNLM("LSTM"), "gru": lambda: RNNLM("GRU")}
    tgt = ids[:, 1:]
    return Case(name, models[name](), ids[:, :-1], _ce(tgt, flat=True))


NAMES = ["mlp", "cnn", "resnet", "transformer", "gpt", "lstm", "gru", "metric"]
