"""Record MMA-Sim's outputs (Microsoft's bit-accurate tensor-core simulator, pure PyTorch
on CPU) for the configurations ampref added from it: mixed E4M3 x E5M2 FP8 MMAs (Hopper
wgmma, Blackwell tcgen05) and block-scaled MMAs (tcgen05 kind::mxf8f6f4 and mxf4nvf4),
into tests/data/mmasim_vectors.npz for tests/test_blockmma.py.

Usage::

    pip install torch==2.13.0
    python scripts/record_mmasim_vectors.py --mmasim /path/to/MMA-Sim

``--mmasim`` is a checkout of microsoft/MMA-Sim (recorded from its commit of 2026-01-29);
only ``mmasim/simulator/arithmetic.py`` is loaded, by path.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

import numpy as np

OUT = Path(__file__).parents[1] / "tests" / "data" / "mmasim_vectors.npz"
ROWS = 300


def _sim(root: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "mmasim_arithmetic", root / "mmasim" / "simulator" / "arithmetic.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _fp8(rng: np.random.Generator, n: int, dt: object) -> np.ndarray:
    import torch
    x = torch.from_numpy(rng.standard_normal(n) * np.exp2(rng.integers(-4, 5, n)))
    return x.to(dt).to(torch.float64).numpy()


def mixed_fp8(sim, rng, out: dict) -> None:  # type: ignore[no-untyped-def]
    import torch
    e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
    for gpu, bits, otype in (("h100", 13, "f32_e8m13"), ("b200", 25, "f32")):
        a = np.stack([_fp8(rng, 32, e4) for _ in range(ROWS)])
        b = np.stack([_fp8(rng, 32, e5) for _ in range(ROWS)])
        c = np.where(rng.random(ROWS) < 0.5, 0.0,
                     rng.standard_normal(ROWS) * 4).astype(np.float32)
        d = [sim.nv_fused_dot_add(torch.tensor(a[i]).to(e4), torch.tensor(b[i]).to(e5),
                                  torch.tensor(c[i]), bits, otype).item() for i in range(ROWS)]
        out[f"mixed/{gpu}/a"], out[f"mixed/{gpu}/b"] = a, b
        out[f"mixed/{gpu}/c"], out[f"mixed/{gpu}/d"] = c, np.float32(d)


def block_scaled(sim, rng, out: dict) -> None:  # type: ignore[no-untyped-def]
    import torch
    e4, e8 = torch.float8_e4m3fn, torch.float8_e8m0fnu
    # mxf8f6f4: E4M3 x E5M2 elements, one E8M0 scale each per 32, K = 32
    a = np.stack([_fp8(rng, 32, e4) for _ in range(ROWS)])
    b = np.stack([_fp8(rng, 32, torch.float8_e5m2) for _ in range(ROWS)])
    sa = np.exp2(rng.integers(-10, 11, (ROWS, 1))).astype(np.float64)
    sb = np.exp2(rng.integers(-10, 11, (ROWS, 1))).astype(np.float64)
    c = (rng.standard_normal(ROWS) * 8).astype(np.float32)
    d = [sim.nv_fused_dot_add(torch.tensor(a[i]).to(e4), torch.tensor(b[i]).to(
        torch.float8_e5m2), torch.tensor(c[i]), 25, "f32", torch.tensor(sa[i, 0]).to(e8),
        torch.tensor(sb[i, 0]).to(e8)).item() for i in range(ROWS)]
    for k, v in dict(a=a, b=b, sa=sa, sb=sb, c=c, d=np.float32(d)).items():
        out[f"mxf8f6f4/{k}"] = v
    # mxf4nvf4: E2M1 elements, UE4M3 scales per 16 (NVFP4), K = 64
    grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    a = rng.choice(grid, (ROWS, 64)) * rng.choice([-1, 1], (ROWS, 64))
    b = rng.choice(grid, (ROWS, 64)) * rng.choice([-1, 1], (ROWS, 64))
    sa = torch.from_numpy(np.abs(rng.standard_normal((ROWS, 4))) * 8).to(e4).double().numpy()
    sb = torch.from_numpy(np.abs(rng.standard_normal((ROWS, 4))) * 8).to(e4).double().numpy()
    d = [sim.nv_fused_dot_add_with_block_scale(
        torch.tensor(a[i], dtype=torch.float32), torch.tensor(b[i], dtype=torch.float32),
        torch.tensor(c[i]), torch.tensor(sa[i]).to(e4), torch.tensor(sb[i]).to(e4),
        35).item() for i in range(ROWS)]
    for k, v in dict(a=a, b=b, sa=sa, sb=sb, c=c, d=np.float32(d)).items():
        out[f"mxf4nvf4/{k}"] = v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mmasim", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    sim, rng, out = _sim(args.mmasim), np.random.default_rng(20261123), {}
    mixed_fp8(sim, rng, out)
    block_scaled(sim, rng, out)
    np.savez_compressed(args.out, **out)
    print(f"wrote {len(out)} arrays to {args.out}")


if __name__ == "__main__":
    main()
