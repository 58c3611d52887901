"""Record torch.amp.GradScaler's scale trajectory for the planted overflow pattern of
examples/amp_fp16_gradscaler.py (tests/data/gradscaler_example_torch.json).

torch runs the same loop protocol (scale, backward, planted inf, unscale_, clip, step,
update, zero_grad) on a parameter whose gradients are finite except at the planted
steps, so its scaler sees the same overflow pattern as the ampref example.

    python scripts/record_gradscaler_example.py     # needs torch
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).parents[1] / "tests" / "data" / "gradscaler_example_torch.json"
#: the example's defaults (examples/amp_fp16_gradscaler.py)
CASE = {"steps": 24, "planted": [5, 6, 13], "init_scale": 2.0**10, "growth_interval": 4}


def torch_trajectory(steps: int, planted: list[int], init_scale: float,
                     growth_interval: int) -> dict[str, Any]:
    """Scales after each update and the skipped steps of torch's GradScaler."""
    import torch

    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.SGD([p], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    scales, skipped = [], []
    for step in range(steps):
        loss = (p + 1.0).sum()
        scaler.scale(loss).backward()
        if step in planted:
            with torch.no_grad():
                p.grad[0] = float("inf")
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_([p], max_norm=1.0)
        before = p.detach().clone()
        scaler.step(opt)
        if torch.equal(before, p.detach()):
            skipped.append(step)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        scales.append(scaler.get_scale())
    return {"scales": scales, "skipped": skipped}


def main() -> None:
    import torch

    rec = dict(CASE, torch=torch.__version__, **torch_trajectory(**CASE))  # type: ignore[arg-type]
    OUT.write_text(json.dumps(rec, indent=1) + "\n")
    print(f"wrote {OUT}: skipped {rec['skipped']}, final scale {rec['scales'][-1]:g}")


if __name__ == "__main__":
    main()
