"""Training-step time of the engine against torch on CPU, as ratios in one run.

    python benchmarks/bench_engine.py [--repeat 5]

Models: a 2-layer MLP (batch 128, 256 -> 512 -> 10) and a 1-block transformer
(batch 8, context 64, width 128, 4 heads, vocab 65). Modes: fp32, and AMP (ampref:
torch-cpu policy bf16 autocast; torch: torch.autocast("cpu", bfloat16)). One step =
forward, backward, AdamW update. Targets (issue 26, compiled kernels): MLP fp32 <= 2.5x
torch, transformer fp32 <= 3x, AMP <= 1x torch autocast. ``AMPREF_KERNELS=numpy`` times the
NumPy specification path.
"""

from __future__ import annotations

import argparse
import platform

import numpy as np
from _timing import best_time

import ampref
from ampref.engine import functional as F
from ampref import nn, optim
from ampref.engine.rng import Generator


def ampref_mlp(amp: bool):  # type: ignore[no-untyped-def]
    g = Generator(0)
    x, y = ampref.tensor(g.normal((128, 256))), g.integers(10, (128,))
    model = nn.MLP([256, 512, 10], seed=1)
    opt = optim.AdamW(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        with ampref.autocast("cpu", "bfloat16", enabled=amp):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    return step


def ampref_transformer(amp: bool):  # type: ignore[no-untyped-def]
    g = Generator(0)
    ids = g.integers(65, (8, 65))
    emb = nn.Embedding(65, 128, std=0.02, seed=1)
    block = nn.TransformerBlock(128, 4, seed=2)
    head = nn.Linear(128, 65, seed=3)
    opt = optim.AdamW(emb.parameters() + block.parameters() + head.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        with ampref.autocast("cpu", "bfloat16", enabled=amp):
            loss = F.cross_entropy(head(block(emb(ids[:, :-1]))), ids[:, 1:])
        loss.backward()
        opt.step()
    return step


def torch_steps(amp: bool):  # type: ignore[no-untyped-def]
    import torch

    torch.manual_seed(0)
    x, y = torch.randn(128, 256), torch.randint(0, 10, (128,))
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    o1 = torch.optim.AdamW(mlp.parameters(), lr=1e-3)
    ids = torch.randint(0, 65, (8, 65))

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(65, 128)
            self.ln1, self.ln2 = torch.nn.LayerNorm(128), torch.nn.LayerNorm(128)
            self.qkv, self.proj = torch.nn.Linear(128, 384), torch.nn.Linear(128, 128)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(128, 512), torch.nn.GELU(),
                                           torch.nn.Linear(512, 128))
            self.head = torch.nn.Linear(128, 65)

        def forward(self, i: torch.Tensor) -> torch.Tensor:
            x = self.emb(i)
            B, T, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).reshape(B, T, 3, 4, D // 4).unbind(2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(o.transpose(1, 2).reshape(B, T, D))
            return self.head(x + self.mlp(self.ln2(x)))

    tr = Block()
    o2 = torch.optim.AdamW(tr.parameters(), lr=1e-3)

    def mlp_step() -> None:
        o1.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            loss = torch.nn.functional.cross_entropy(mlp(x), y)
        loss.backward()
        o1.step()

    def tr_step() -> None:
        o2.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            logits = tr(ids[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 65).float(),
                                                     ids[:, 1:].reshape(-1))
        loss.backward()
        o2.step()
    return mlp_step, tr_step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    import torch

    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), numpy {np.__version__}, kernels "
          f"{ampref.get_kernels()}")
    print(f"{'model':12} {'mode':5} {'ampref ms':>10} {'torch ms':>9} {'ratio':>6} target")
    for amp in (False, True):
        tm, tt = torch_steps(amp)
        for name, ours, theirs in (("mlp", ampref_mlp(amp), tm),
                                   ("transformer", ampref_transformer(amp), tt)):
            a = best_time(ours, args.repeat)
            b = best_time(theirs, args.repeat)
            target = 1.0 if amp else (2.5 if name == "mlp" else 3.0)
            mode = "amp" if amp else "fp32"
            print(f"{name:12} {mode:5} {a * 1e3:10.2f} {b * 1e3:9.2f} {a / b:6.2f} "
                  f"<= {target:g}x {'met' if a / b <= target else 'NOT met'}")


if __name__ == "__main__":
    main()
