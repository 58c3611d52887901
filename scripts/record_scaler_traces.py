"""Record loss-scale trajectories from the real libraries as test data.

    python scripts/record_scaler_traces.py     # needs torch (CPU) and, for jmp, jax + jmp

Writes tests/data/scaler_traces.json: for each case the library, its version, the
parameters, the overflow sequence and, after every update, the scale as a float32 hex
pattern and the growth counter. The same drivers run live in
tests/scaling/test_scaling_conformance.py when the libraries are installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np


def torch_trace(init_scale: float, growth_factor: float, backoff_factor: float,
                growth_interval: int, overflows: list[int],
                tracker0: int = 0) -> list[tuple[str, int]]:
    """Drive torch.amp.GradScaler("cpu") through its public API, one step per flag."""
    import torch

    p = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([p], lr=0.0)
    sc = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_factor=growth_factor,
                              backoff_factor=backoff_factor, growth_interval=growth_interval)
    sc.scale(torch.ones(1))  # materialise _scale and _growth_tracker
    if tracker0:
        sd = sc.state_dict()
        sd["_growth_tracker"] = tracker0
        sc.load_state_dict(sd)
    out = []
    for of in overflows:
        p.grad = torch.full((1,), float("inf") if of else 1.0)
        sc.step(opt)
        sc.update()
        s = np.float32(sc.get_scale())
        out.append((f"{int(np.array([s]).view(np.uint32)[0]):08x}", int(sc._growth_tracker.item())))
    return out


def jmp_trace(init_scale: float, factor: int, period: int, min_scale: float,
              overflows: list[int]) -> list[tuple[str, int]]:
    """Drive jmp.DynamicLossScale.adjust (no jit, so min_loss_scale is kept)."""
    import jax.numpy as jnp
    import jmp

    ls = jmp.DynamicLossScale(jnp.float32(init_scale), period=period, factor=factor,
                              min_loss_scale=jnp.float32(min_scale))
    out = []
    for of in overflows:
        ls = ls.adjust(jnp.asarray(not of))
        s = np.float32(ls.loss_scale)
        out.append((f"{int(np.array([s]).view(np.uint32)[0]):08x}", int(ls.counter)))
    return out


def cases(rng: np.random.Generator) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for _ in range(12):  # random sequences, non-power-of-two factors, small intervals
        out.append(dict(lib="torch", init_scale=float(rng.choice([1.0, 3.0, 65536.0, 1e-3])),
                        growth_factor=float(rng.choice([2.0, 1.7, 3.1])),
                        backoff_factor=float(rng.choice([0.5, 0.37, 0.9])),
                        growth_interval=int(rng.integers(1, 6)),
                        overflows=[int(v) for v in rng.random(300) < rng.uniform(0.05, 0.6)]))
    out.append(dict(lib="torch", init_scale=1.0, growth_factor=2.0, backoff_factor=0.5,
                    growth_interval=2000, overflows=[1] * 170))          # collapse to 0
    out.append(dict(lib="torch", init_scale=2.0**100, growth_factor=2.0, backoff_factor=0.5,
                    growth_interval=1, overflows=[0] * 40))             # growth refused at 2^127
    out.append(dict(lib="torch", init_scale=1.5 * 2.0**120, growth_factor=1.9, backoff_factor=0.5,
                    growth_interval=1, overflows=[0] * 20))
    # the equality trap: a tracker above the interval never equals it again
    out.append(dict(lib="torch", init_scale=8.0, growth_factor=2.0, backoff_factor=0.5,
                    growth_interval=3, tracker0=5, overflows=[0] * 10 + [1] + [0] * 6))
    for _ in range(6):
        out.append(dict(lib="jmp", init_scale=float(rng.choice([8.0, 2.0**15, 3.0])),
                        factor=int(rng.choice([2, 3])), period=int(rng.integers(1, 5)),
                        min_scale=float(rng.choice([1.0, 0.25])),
                        overflows=[int(v) for v in rng.random(200) < rng.uniform(0.1, 0.6)]))
    return out


def main() -> None:
    rng = np.random.default_rng(20261122)
    recorded = []
    for case in cases(rng):
        args = {k: v for k, v in case.items() if k != "lib"}
        try:
            trace = torch_trace(**args) if case["lib"] == "torch" else jmp_trace(**args)
        except ImportError as e:
            print(f"skipping {case['lib']}: {e}", file=sys.stderr)
            continue
        mod = __import__(case["lib"])
        recorded.append(dict(case, version=getattr(mod, "__version__", "?"), trace=trace))
    dest = Path(__file__).resolve().parents[1] / "tests" / "data" / "scaler_traces.json"
    dest.write_text(json.dumps(recorded, indent=0))
    print(f"wrote {len(recorded)} traces to {dest}")


if __name__ == "__main__":
    main()
