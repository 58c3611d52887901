"""The canonical PyTorch fp16 AMP loop on ampref: autocast, GradScaler, clipping.

Only the imports differ from the torch recipe. A small MLP learns a 3-class problem on
synthetic data; at the steps named by --plant one gradient element is set to inf
after backward (an overflow planted on purpose), so the scaler must skip exactly those
steps and back off. The scale trajectory and the skipped steps equal
torch.amp.GradScaler's for the same overflow pattern (tests/test_examples.py).

    python examples/amp_fp16_gradscaler.py [--steps 24] [--plant 5,6,13] [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import ampref
from ampref import functional as F
from ampref import nn, optim


def main(argv: list[str] | None = None) -> dict[str, object]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--plant", default="5,6,13",
                    help="loop steps (from 0) whose gradients get an inf; step k is update k+1")
    ap.add_argument("--json", default=None, help="write the trajectory here")
    args = ap.parse_args(argv)
    planted = {int(s) for s in args.plant.split(",") if s}

    rng = np.random.default_rng(0)
    x_all = rng.standard_normal((256, 8))
    y_all = (x_all[:, :3].argmax(axis=1)).astype(np.int64)

    model = nn.Sequential(nn.Linear(8, 32, seed=1), nn.ReLU(), nn.Linear(32, 3, seed=2))
    optimizer = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = ampref.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=4)

    scales, skipped, losses = [], [], []
    for step in range(args.steps):
        rows = slice((step * 32) % 256, (step * 32) % 256 + 32)
        x, y = ampref.tensor(x_all[rows]), y_all[rows]
        with ampref.autocast(device_type="cuda", dtype=ampref.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if step in planted:  # an overflow, as a too-large scale would cause
            model.parameters()[0].grad[0, 0] = np.inf
        scaler.unscale_(optimizer)
        ampref.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        if scaler.step(optimizer, return_found_inf=True):
            skipped.append(step)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        scales.append(scaler.get_scale())
        losses.append(loss.item())

    result = {"scales": scales, "skipped": skipped, "losses": losses,
              "init_scale": 2.0**10, "growth_interval": 4, "planted": sorted(planted)}
    # one numbering on screen: the scaler's, whose updates count from 1 (the loop's
    # index `step`, used by --plant and the JSON, counts from 0)
    print(f"loss {losses[0]:.3f} -> {losses[-1]:.3f}; skipped updates "
          f"{[s + 1 for s in skipped]} (numbered from 1, as in the report below); "
          f"scale {scales[0]:g} -> {scales[-1]:g}")
    print(scaler.loss_scaler.report())
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f)
    return result


if __name__ == "__main__":
    main()
