"""The PyTorch bf16 autocast loop on ampref: no loss scaler (bf16 has fp32's range).

A small MLP learns a 3-class problem on synthetic data under bf16 autocast with AdamW
on float32 master weights; the loop is torch's with only the imports changed.

    python examples/amp_bf16.py [--steps 40]
"""

from __future__ import annotations

import argparse

import numpy as np

import ampref
from ampref import functional as F
from ampref import nn, optim


def main(argv: list[str] | None = None) -> list[float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((256, 8))
    y_all = (x_all[:, :3].argmax(axis=1)).astype(np.int64)

    model = nn.Sequential(nn.Linear(8, 32, seed=1), nn.GELU(), nn.Linear(32, 3, seed=2))
    optimizer = optim.AdamW(model.parameters(), lr=1e-2)

    losses = []
    for step in range(args.steps):
        rows = slice((step * 32) % 256, (step * 32) % 256 + 32)
        x, y = ampref.tensor(x_all[rows]), y_all[rows]
        with ampref.autocast(device_type="cpu", dtype=ampref.bfloat16):
            logits = model(x)  # linear runs in bf16 under the torch-cpu policy
            loss = F.cross_entropy(logits, y)
        loss.backward()
        ampref.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
    print(f"logits {logits.format}, loss {loss.format}; loss {losses[0]:.3f} -> {losses[-1]:.3f}")
    return losses


if __name__ == "__main__":
    main()
