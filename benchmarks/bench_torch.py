"""Overhead of ampref.torch's emulate and shadow on a small GPT-style training step,
against the same step in plain torch on the CPU (fp32), one run.

    python benchmarks/bench_torch.py [--repeat 5]

Model: the TinyGPT of examples/torch_emulate.py (vocab 65, width 32, 4 heads, context
32, batch 8); one step = forward, cross entropy, backward, AdamW. Target (issue 27):
emulate <= 10x torch with the compiled kernels.
"""

from __future__ import annotations

import argparse
import platform
import sys
from pathlib import Path

import torch
from _timing import best_time

import ampref
import ampref.torch as at

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from torch_emulate import TinyGPT  # noqa: E402


def make_step(mode: str):  # type: ignore[no-untyped-def]
    torch.manual_seed(0)
    model = TinyGPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 65, (8, 33))

    def step() -> None:
        loss = torch.nn.functional.cross_entropy(model(ids[:, :-1]).reshape(-1, 65),
                                                 ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad()

    if mode == "torch":
        return step

    def wrapped() -> None:
        with (at.emulate(model) if mode == "emulate" else at.shadow(model)):
            step()
    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), kernels {ampref.get_kernels()}")
    base = best_time(make_step("torch"), args.repeat)
    print(f"{'mode':8} {'ms/step':>9} {'/ torch':>8}")
    print(f"{'torch':8} {base * 1e3:9.2f} {1.0:8.2f}")
    for mode in ("emulate", "shadow"):
        t = best_time(make_step(mode), args.repeat)
        note = f"  target <= 10x: {'met' if t / base <= 10 else 'NOT met'}" \
            if mode == "emulate" else ""
        print(f"{mode:8} {t * 1e3:9.2f} {t / base:8.2f}{note}")


if __name__ == "__main__":
    main()
