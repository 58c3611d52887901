"""Record MMA-Sim's outputs (Microsoft's bit-accurate tensor-core simulator, pure PyTorch
on CPU) for the configurations ampref added from it: mixed E4M3 x E5M2 FP8 MMAs (Hopper
wgmma, Blackwell tcgen05) and block-scaled MMAs (tcgen05 kind::mxf8f6f4 and mxf4nvf4),
into tests/data/mmasim_vectors.npz for tests/accumulation/test_blockmma.py; an adversarial campaign
over NVIDIA block FMAs (every GPU family, fp32 and fp16 output, FP8 with fp16 output)
for the rule classes of ACC-TC-008 (tests/accumulation/test_gpus.py); and AMD CDNA1/2/3 MFMA rows
(tests/accumulation/test_mfma.py), in tests/data/mmasim_matrixcores.npz.

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
OUT2 = Path(__file__).parents[1] / "tests" / "data" / "mmasim_matrixcores.npz"
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


def _draw(rng: np.random.Generator, shape: tuple[int, ...], dt: object, kind: str,
          top: int, bottom: int) -> np.ndarray:
    """Values of torch dtype ``dt`` (as float64): kind "normal" (wide exponent spread),
    "tiny" (near the bottom of the range), "huge" (near the top), "zeros" (mostly +-0),
    "cancel" (pairs that cancel)."""
    import torch
    n = int(np.prod(shape))
    lo, hi = {"normal": ((top + bottom) // 2 - 12, (top + bottom) // 2 + 12),
              "tiny": (bottom - 2, bottom + 6), "huge": (top - 4, top),
              "zeros": (-8, 8), "cancel": (-10, 10)}[kind]
    x = rng.standard_normal(n) * np.exp2(rng.integers(lo, hi + 1, n))
    x = np.clip(x, -2.0**top * 1.5, 2.0**top * 1.5)
    zero = rng.random(n) < (0.7 if kind == "zeros" else 0.1)
    x[zero] = np.where(rng.random(int(zero.sum())) < 0.5, 0.0, -0.0)
    v = torch.from_numpy(x).to(dt).to(torch.float64).numpy().reshape(shape)
    if kind == "cancel":
        v[..., 1::2] = -v[..., 0::2][..., :v[..., 1::2].shape[-1]]
    return v


#: (name, MMA-Sim fraction bits, MMA-Sim output type, ampref GPU, input format, block K,
#: output format): one block per row, as ``nv_fused_dot_add`` computes an instruction
NV_CONFIGS = (
    ("v100-fp16", 23, "f32", "v100", "float16", 4, "float32"),
    ("v100-fp16-f16", 23, "f16", "v100", "float16", 4, "float16"),
    ("a100-fp16", 24, "f32", "a100", "float16", 8, "float32"),
    ("a100-bf16", 24, "f32", "a100", "bfloat16", 8, "float32"),
    ("a100-tf32", 24, "f32", "a100", "tf32", 4, "float32"),
    ("h100-fp16", 25, "f32", "h100", "float16", 16, "float32"),
    ("h100-fp16-f16", 25, "f16", "h100", "float16", 16, "float16"),
    ("h100-bf16", 25, "f32", "h100", "bfloat16", 16, "float32"),
    ("h100-tf32", 25, "f32", "h100", "tf32", 8, "float32"),
    ("h100-e4m3", 13, "f32_e8m13", "h100", "float8_e4m3fn", 32, "float32"),
    ("h100-e4m3-f16", 13, "f16", "h100", "float8_e4m3fn", 32, "float16"),
    ("h100-e5m2-f16", 13, "f16", "h100", "float8_e5m2", 32, "float16"),
    ("b200-e4m3", 25, "f32", "b200", "float8_e4m3fn", 32, "float32"),
    ("b200-e5m2-f16", 25, "f16", "b200", "float8_e5m2", 32, "float16"),
)
_RANGE = {"float16": (15, -24), "bfloat16": (127, -133), "tf32": (127, -136),
          "float8_e4m3fn": (8, -9), "float8_e5m2": (15, -16)}
KINDS = ("normal", "tiny", "huge", "zeros", "cancel")
# fp16 output, exact sums a hair above a rounding tie: 2^-25 + 2^-45 (the floor L
# truncates the 2^-45 away) and 2^-20 + 2^-25 + 2^-40 with a subnormal fp16 c (an addend
# exponent floored at -14 truncates the 2^-40 away); random rows rarely hit either
_FP16_TIES = (([2.0**-12, 2.0**-24], [2.0**-13, 2.0**-21], 0.0),
              ([2.0**-12, 2.0**-20], [2.0**-13, 2.0**-20], 2.0**-20))


def nv_rules(sim, rng, out: dict, rows: int) -> None:  # type: ignore[no-untyped-def]
    import torch
    dts = {"float16": torch.float16, "bfloat16": torch.bfloat16, "tf32": torch.float32,
           "float8_e4m3fn": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    for name, bits, otype, _, fmt, k, fout in NV_CONFIGS:
        dt, (top, bottom) = dts[fmt], _RANGE[fmt]
        cdt = torch.float16 if fout == "float16" else torch.float32
        a = np.empty((rows, k), np.float32)
        b = np.empty((rows, k), np.float32)
        c = np.empty(rows, np.float32)
        d = np.empty(rows, np.float32)
        for i in range(rows):
            kind = KINDS[i % len(KINDS)]
            a[i] = _draw(rng, (k,), dt, kind, top // 2 + 1, bottom)
            b[i] = _draw(rng, (k,), dt, kind, top // 2 + 1, bottom)
            if fmt == "tf32":  # raw fp32 words, low bits set: MMA-Sim truncates them
                a[i] = (a[i].view(np.uint32) | rng.integers(0, 1 << 13, k, np.uint32)).view(
                    np.float32)
                if i % 97 == 0:  # a NaN whose payload lies only in the cleared bits
                    a[i, 0] = np.array([0x7F800001], np.uint32).view(np.float32)[0]
            cw = rng.choice([0.0, -0.0, 1.0, 2.0**-130, 2.0**-20, 2.0**100, 6e4])
            c[i] = torch.tensor(cw * rng.standard_normal()).to(cdt).item()
            if fmt == "float16" and fout == "float16" and i < len(_FP16_TIES):
                a[i], b[i], c[i] = 0.0, 0.0, _FP16_TIES[i][2]
                a[i, :2], b[i, :2] = _FP16_TIES[i][0], _FP16_TIES[i][1]
            ta, tb = torch.from_numpy(a[i]), torch.from_numpy(b[i])
            if fmt == "tf32":
                ta, tb = sim.truncate_to_tf32(ta), sim.truncate_to_tf32(tb)
            d[i] = sim.nv_fused_dot_add(ta.to(dt), tb.to(dt), torch.tensor(c[i]).to(cdt),
                                        bits, otype).item()
        for key, v in dict(a=a, b=b, c=c, d=d).items():
            out[f"nv/{name}/{key}"] = v


#: (ampref GPU, MMA-Sim arch, MMA-Sim qualifier, A format, B format, K)
AMD_CONFIGS = (
    ("mi100", "CDNA1", "f32_16x16x4f32", "float32", "float32", 4),
    ("mi100", "CDNA1", "f32_16x16x16f16", "float16", "float16", 16),
    ("mi100", "CDNA1", "f32_16x16x8bf16", "bfloat16", "bfloat16", 8),
    ("mi250", "CDNA2", "f64_16x16x4f64", "float64", "float64", 4),
    ("mi250", "CDNA2", "f32_16x16x16f16", "float16", "float16", 16),
    ("mi250", "CDNA2", "f32_16x16x16bf16_1k", "bfloat16", "bfloat16", 16),
    ("mi300", "CDNA3", "f32_16x16x4_f32", "float32", "float32", 4),
    ("mi300", "CDNA3", "f32_16x16x8_xf32", "tf32", "tf32", 8),
    ("mi300", "CDNA3", "f32_16x16x16_f16", "float16", "float16", 16),
    ("mi300", "CDNA3", "f32_16x16x16_bf16", "bfloat16", "bfloat16", 16),
    ("mi300", "CDNA3", "f32_16x16x32_fp8_fp8", "float8_e4m3fnuz", "float8_e4m3fnuz", 32),
    ("mi300", "CDNA3", "f32_16x16x32_fp8_bf8", "float8_e4m3fnuz", "float8_e5m2fnuz", 32),
    ("mi300", "CDNA3", "f32_16x16x32_bf8_bf8", "float8_e5m2fnuz", "float8_e5m2fnuz", 32),
)
_AMD_RANGE = {"float32": (127, -149), "float64": (1023, -1074), "float16": (15, -24),
              "bfloat16": (127, -133), "tf32": (127, -136), "float8_e4m3fnuz": (7, -10),
              "float8_e5m2fnuz": (15, -17)}


def _amd_row(ar, m, q: str, A, B, C):  # type: ignore[no-untyped-def]
    """One row of ``mmasim.simulator.amd.mfma.__call__``, step for step. Its pairwise
    path (CDNA1/2 f16/bf16) asserts fp32 operands in ``pairwise_dot`` but is handed the
    fp16/bf16 tensors, so MMA-Sim's own call fails there; the operands are converted to
    fp32 (exact) after the flush, which is what ``pairwise_dot`` computes on."""
    import torch
    if m.flush_denormal:
        A, B, C = ar.flush_denormal(A), ar.flush_denormal(B), ar.flush_denormal(C)
    if m.is_xf32:
        A, B = ar.truncate_to_tf32(A), ar.truncate_to_tf32(B)
    s, k, g = C, A.numel(), m.group_size
    for lo in range(0, k, g):
        if m.operation_type == "fma":
            for j in range(lo, min(lo + g, k)):
                s = ar.fma(A[j], B[j], s)
        elif m.operation_type == "pairwise":
            s = s + ar.pairwise_dot(A[lo:lo + g].float(), B[lo:lo + g].float(),
                                    m.flush_denormal)
            if m.flush_denormal:
                s = ar.flush_denormal(s, keep_sign=True)
        else:
            s = torch.tensor(ar.amd_fused_dot_rd_add(A[lo:lo + g], B[lo:lo + g], s, 24,
                                                     is_fp8=q.endswith("8")), dtype=m.d_type)
    return s.item()


def amd(root: Path, rng, out: dict, rows: int) -> None:  # type: ignore[no-untyped-def]
    import sys

    import torch
    sys.path.insert(0, str(root))
    from mmasim.simulator import arithmetic as ar
    from mmasim.simulator.amd import mfma
    for gpu, arch, q, fa, fb, k in AMD_CONFIGS:
        m = mfma(arch, q)
        wide = torch.float64 if fa == "float64" else torch.float32
        a, b, c, d = np.empty((rows, k)), np.empty((rows, k)), np.empty(rows), np.empty(rows)
        for i in range(rows):
            kind = KINDS[i % len(KINDS)]
            a[i] = _draw(rng, (k,), m.a_type, kind, _AMD_RANGE[fa][0] // 2 + 1,
                         _AMD_RANGE[fa][1])
            b[i] = _draw(rng, (k,), m.b_type, kind, _AMD_RANGE[fb][0] // 2 + 1,
                         _AMD_RANGE[fb][1])
            cw = rng.choice([0.0, -0.0, 1.0, 2.0**-130, 2.0**-20, 2.0**100])
            c[i] = torch.tensor(cw * rng.standard_normal()).to(wide).item()
            d[i] = _amd_row(ar, m, q, torch.from_numpy(a[i]).to(m.a_type),
                            torch.from_numpy(b[i]).to(m.b_type), torch.tensor(c[i]).to(wide))
        name = f"{gpu}-{q}"
        for key, v in dict(a=a, b=b, c=c, d=d).items():
            out[f"amd/{name}/{key}"] = v
        out[f"amd/{name}/formats"] = np.array([gpu, fa, fb])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mmasim", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--out2", type=Path, default=OUT2)
    ap.add_argument("--rows", type=int, default=400, help="rows per matrix-core config")
    args = ap.parse_args()
    sim, rng, out = _sim(args.mmasim), np.random.default_rng(20261123), {}
    mixed_fp8(sim, rng, out)
    block_scaled(sim, rng, out)
    np.savez_compressed(args.out, **out)
    print(f"wrote {len(out)} arrays to {args.out}")
    rng2, out2 = np.random.default_rng(20261124), {}
    nv_rules(sim, rng2, out2, args.rows)
    amd(args.mmasim, rng2, out2, args.rows)
    np.savez_compressed(args.out2, **out2)
    print(f"wrote {len(out2)} arrays to {args.out2}")


if __name__ == "__main__":
    main()
