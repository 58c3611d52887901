"""A plain PyTorch training script run on ampref's reference, then inspected with shadow.

    python examples/torch_emulate.py [--steps 20]

The model is ordinary torch code (a small GPT-style transformer); nothing in it refers
to ampref. ``ampref.torch.emulate`` computes every floating aten op (forward, backward,
AdamW) with ampref's numerics; the loop is written for a GPU (``torch.autocast("cuda")``,
``torch.amp.GradScaler("cuda")``) and runs unchanged on the CPU, torch's CUDA autocast
lists applied per aten op. Afterwards ``ampref.torch.shadow`` lets torch compute one step
and compares each op with ampref.
"""

from __future__ import annotations

import argparse

import torch

import ampref.torch as at


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int = 65, dim: int = 32, heads: int = 4, ctx: int = 32) -> None:
        super().__init__()
        self.heads = heads
        self.emb = torch.nn.Embedding(vocab, dim)
        self.pos = torch.nn.Parameter(torch.zeros(ctx, dim))
        self.ln1, self.ln2, self.lnf = (torch.nn.LayerNorm(dim) for _ in range(3))
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                       torch.nn.Linear(4 * dim, dim))
        self.head = torch.nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        B, T = ids.shape
        x = self.emb(ids) + self.pos[:T]
        q, k, v = self.qkv(self.ln1(x)).split(x.shape[-1], dim=-1)
        q, k, v = (t.view(B, T, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(o.transpose(1, 2).reshape(B, T, -1))
        x = x + self.mlp(self.ln2(x))
        return self.head(self.lnf(x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    text = torch.randint(0, 65, (64, 33))
    with at.emulate(model) as em:
        scaler = torch.amp.GradScaler("cuda")  # made inside emulate: enabled without a GPU
        for step in range(args.steps):
            batch = text[(step * 8) % 64:(step * 8) % 64 + 8]
            with torch.autocast("cuda", dtype=torch.float16):  # CUDA's lists, CPU tensors
                logits = model(batch[:, :-1])
                loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 65),
                                                         batch[:, 1:].reshape(-1))
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            if step % 5 == 0 or step == args.steps - 1:
                print(f"step {step:3d}  loss {loss.item():.4f}  scale {scaler.get_scale():g}")
    print(f"emulated {sum(r.calls for r in em.report.rows())} op calls, "
          f"{len(em.report.not_emulated())} left to torch")
    with at.shadow(model) as sh:
        with torch.autocast("cpu", torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(text[:8, :-1]).float().reshape(-1, 65),
                                                     text[:8, 1:].reshape(-1))
        loss.backward()
    print("\nshadow: torch's CPU kernels against ampref, worst first")
    print(sh.report.table(limit=8))


if __name__ == "__main__":
    main()
