"""Record the outputs of torchao and of Transformer Engine's pure-PyTorch references on
fixed inputs, for tests/recipes/test_recipes_conformance.py (bitwise comparison with ampref's
``te-reference`` and ``torchao`` profiles).

Usage::

    pip install torch==2.13.0 torchao==0.18.0
    python scripts/record_recipe_vectors.py --te /path/to/TransformerEngine

``--te`` is a checkout of NVIDIA/TransformerEngine (recorded from commit 2026-08-22);
only three Python reference files are read from it, with their TE imports stubbed, so
no TE build is needed. Output: tests/data/recipe_vectors.npz.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np

OUT = Path(__file__).parents[1] / "tests" / "data" / "recipe_vectors.npz"


def inputs() -> dict[str, np.ndarray]:
    """Named float32 inputs (128 x 256, or 16 x 256 for the edge cases)."""
    rng = np.random.default_rng(20261123)
    mixed = rng.standard_normal((128, 256)).astype(np.float32)
    mixed *= np.exp2(rng.integers(-24, 24, (128, 16))).repeat(16, axis=1).astype(np.float32)
    mid = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0, -0.25, -0.75, -1.25, -1.75,
                    -2.5, -3.5, -5.0, 0.1], np.float32)
    midpoints = np.tile(mid, (16, 2))
    edges = {
        "mixed": mixed,
        "midpoints": midpoints,
        "zeros": np.zeros((16, 32), np.float32),
        "negzero": np.where(np.arange(512).reshape(16, 32) % 3 == 0, -0.0,
                            rng.standard_normal((16, 32))).astype(np.float32),
        "subnormal": (rng.standard_normal((16, 32)) * 1e-40).astype(np.float32),
        "huge": np.where(np.arange(512).reshape(16, 32) % 17 == 0, 3e38,
                         rng.standard_normal((16, 32))).astype(np.float32),
        "one_big": np.where(np.arange(512).reshape(16, 32) % 32 == 7, 1e6,
                            rng.standard_normal((16, 32)) * 1e-3).astype(np.float32),
    }
    nan = rng.standard_normal((16, 32)).astype(np.float32)
    nan[3, 5] = np.nan
    inf = rng.standard_normal((16, 32)).astype(np.float32)
    inf[4, 9] = np.inf
    inf[7, 30] = -np.inf
    edges["nan"], edges["inf"] = nan, inf
    # widen the 16 x 32 cases to 16 x 256 (two 1x128 FP8 blocks per row), column 32+ scaled
    # by 2^-3 so that the copies get blocks of their own
    for k in list(edges):
        if k != "mixed":
            e = edges[k]
            edges[k] = np.concatenate([e] + [e * np.float32(2.0**-3)] * 7, axis=1)
    return edges


def _load(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def te_modules(te: Path) -> tuple[types.ModuleType, types.ModuleType, types.ModuleType]:
    """reference_nvfp4, blockwise_quantizer_reference and reference_current_scaling with
    TE's own imports stubbed."""
    pkg = "transformer_engine.pytorch"
    for n in ("transformer_engine", pkg, f"{pkg}.custom_recipes"):
        sys.modules.setdefault(n, types.ModuleType(n))
    qt = types.ModuleType(f"{pkg}.quantized_tensor")

    class _Base:  # the reference classes only subclass these
        def __init__(self, *a: object, **k: object) -> None:
            pass

    qt.QuantizedTensorStorage = _Base  # type: ignore[attr-defined]
    qt.Quantizer = _Base  # type: ignore[attr-defined]
    sys.modules[qt.__name__] = qt
    gemm: types.ModuleType = types.ModuleType("gemm")  # names used only in annotations
    for attr in ("GEMMType", "MMParams", "high_precision_gemm_ref"):
        setattr(gemm, attr, types.SimpleNamespace(FPROP="fprop"))
    sys.modules[f"{pkg}.custom_recipes.gemm"] = gemm
    cr = te / "transformer_engine" / "pytorch" / "custom_recipes"
    utils = _load(cr / "reference_utils.py", f"{pkg}.custom_recipes.reference_utils")
    sys.modules[f"{pkg}.custom_recipes"].reference_utils = utils  # type: ignore[attr-defined]
    sys.modules[f"{pkg}.custom_recipes"].gemm = sys.modules[f"{pkg}.custom_recipes.gemm"]  # type: ignore[attr-defined]
    nv = _load(cr / "reference_nvfp4.py", "te_reference_nvfp4")
    cs = _load(cr / "reference_current_scaling.py", "te_reference_current_scaling")
    refs = te / "tests" / "pytorch"
    sys.path.insert(0, str(refs))
    blk = _load(refs / "references" / "blockwise_quantizer_reference.py", "te_blockwise_ref")
    return nv, blk, cs


def _u8(t: object) -> np.ndarray:
    import torch
    assert isinstance(t, torch.Tensor)
    return t.contiguous().view(torch.uint8).numpy().copy()


def _fp4_codes(packed: np.ndarray) -> np.ndarray:
    """Unpack two E2M1 codes per byte (low nibble first) to one per byte."""
    out = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), np.uint8)
    out[..., ::2], out[..., 1::2] = packed & 0xF, packed >> 4
    return out


def record_te(te: Path, xs: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    import torch
    nv, blk, cs = te_modules(te)
    for name, x in xs.items():
        t = torch.from_numpy(x)
        for pow2 in (False, True):  # the quantizer's _quantize: (x.float() * scale).to(fp8)
            amax = torch.amax(torch.abs(t)).view(1)
            scale, scale_inv, _ = cs._scale_from_amax_tensor(
                t.dtype, amax=amax, quant_dtype=torch.float8_e4m3fn, eps=0.0,
                pow_2_scales=pow2)
            key = f"te-reference/fp8_current/pow2={int(pow2)}/{name}"
            out[f"{key}/codes"] = _u8((t.float() * scale).to(torch.float8_e4m3fn))
            out[f"{key}/scales"] = scale_inv.numpy().astype(np.float32).reshape(())
        for tile in ((1, 16), (16, 16)):
            gamax = torch.max(torch.abs(t)).to(torch.float32).view(1)
            q, s = nv.NVFP4QuantizerRef._quantize_blockwise_reference(
                t, gamax, tile[1], tile[0], pow_2_scales=False, eps=0.0)
            s = s[::tile[0]] if tile[0] > 1 else s
            key = f"te-reference/nvfp4/{tile[0]}x{tile[1]}/{name}"
            out[f"{key}/codes"], out[f"{key}/scale_codes"] = _fp4_codes(_u8(q)), _u8(s)
            q, s = nv.NVFP4QuantizerRef._quantize_blockwise_reference(
                t, gamax, tile[1], tile[0], pow_2_scales=False, eps=0.0, nvfp4_use_4over6=True)
            s = s[::tile[0]] if tile[0] > 1 else s
            key = f"te-reference/fos/{tile[0]}x{tile[1]}/{name}"
            out[f"{key}/codes"], out[f"{key}/scale_codes"] = _fp4_codes(_u8(q)), _u8(s)
        for pow2 in (True, False):
            for tile in (1, 128):
                if tile == 128 and x.shape[0] % 128:
                    continue
                ref = blk.BlockwiseQuantizerReference
                if tile == 1:
                    q, s = ref._quantize_vectorwise_reference(
                        t, torch.float8_e4m3fn, 128, pow_2_scales=pow2, eps=0.0)
                else:
                    r = ref._quantize_square_block_tiling(
                        t, torch.float8_e4m3fn, 128, return_transpose=False,
                        pow_2_scales=pow2, eps=0.0)
                    q, s = r.data, r.scale
                key = f"te-reference/fp8_block/{tile}x128/pow2={int(pow2)}/{name}"
                out[f"{key}/codes"] = _u8(q)
                out[f"{key}/scales"] = s.numpy().astype(np.float32)


def torchao_blockwise_reference() -> types.SimpleNamespace:
    """torchao's pure-torch blockwise FP8 quantizers, taken from the source of
    prototype/blockwise_fp8_training/kernels.py (the module itself imports Triton, which
    a CPU machine lacks): the two functions and EPS are compiled unchanged."""
    import ast

    import torch
    import torchao
    path = Path(torchao.__file__).parent / "prototype" / "blockwise_fp8_training" / "kernels.py"
    tree = ast.parse(path.read_text())
    keep = [n for n in tree.body if (isinstance(n, ast.FunctionDef) and n.name in (
        "torch_blockwise_scale_act_quant_lhs", "torch_blockwise_scale_weight_quant")) or (
        isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "EPS" for t in n.targets))]
    ns: dict[str, object] = {"torch": torch, "e4m3_dtype": torch.float8_e4m3fn}
    exec(compile(ast.Module(body=keep, type_ignores=[]), str(path), "exec"), ns)
    return types.SimpleNamespace(**ns)


def record_torchao(xs: dict[str, np.ndarray], out: dict[str, np.ndarray]) -> None:
    import torch
    bk = torchao_blockwise_reference()
    from torchao.prototype.mx_formats import mx_tensor, nvfp4_tensor
    from torchao.prototype.mx_formats.config import ScaleCalculationMode as Mode
    from torchao.prototype.mx_formats.constants import DTYPE_FP6_E2M3, DTYPE_FP6_E3M2
    from torchao.float8 import float8_utils as fu
    elems = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2,
             "mxfp6_e2m3": DTYPE_FP6_E2M3, "mxfp6_e3m2": DTYPE_FP6_E3M2,
             "mxfp4": torch.float4_e2m1fn_x2}
    for name, x in xs.items():
        t = torch.from_numpy(x)
        for rec, dt in elems.items():
            for mode in ("floor", "rceil", "ceil", "even"):
                s, d = mx_tensor.to_mx(t, dt, 32, getattr(Mode, mode.upper()))
                codes = _u8(d)
                codes = _fp4_codes(codes) if rec == "mxfp4" else codes
                key = f"torchao/{rec}/{mode}/{name}"
                out[f"{key}/codes"], out[f"{key}/scale_codes"] = codes, _u8(s)
        pts = nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(t)))
        for two_level in (True, False):
            s, d = nvfp4_tensor.nvfp4_quantize(t, 16, pts if two_level else None)
            key = f"torchao/nvfp4/two_level={int(two_level)}/{name}"
            out[f"{key}/codes"], out[f"{key}/scale_codes"] = _fp4_codes(_u8(d)), _u8(s)
            out[f"{key}/global_scale"] = pts.numpy().astype(np.float32).reshape(())
        q, s = bk.torch_blockwise_scale_act_quant_lhs(t.contiguous(), 128)
        out[f"torchao/fp8_block/1x128/{name}/codes"] = _u8(q)
        out[f"torchao/fp8_block/1x128/{name}/scales"] = s.numpy().astype(np.float32)
        if x.shape[0] % 128 == 0:
            q, s = bk.torch_blockwise_scale_weight_quant(t.contiguous(), 128)
            out[f"torchao/fp8_block/128x128/{name}/codes"] = _u8(q)
            out[f"torchao/fp8_block/128x128/{name}/scales"] = s.numpy().astype(np.float32)
        for pow2 in (False, True):
            sc = fu.amax_to_scale(torch.max(torch.abs(t)), torch.float8_e4m3fn, pow2)
            q = fu.to_fp8_saturated(t * sc, torch.float8_e4m3fn)
            key = f"torchao/fp8_current/pow2={int(pow2)}/{name}"
            out[f"{key}/codes"], out[f"{key}/scale"] = _u8(q), sc.numpy().astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--te", type=Path, required=True, help="TransformerEngine checkout")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    import torch
    import torchao
    xs = inputs()
    out: dict[str, np.ndarray] = {f"input/{k}": v for k, v in xs.items()}
    record_te(args.te, xs, out)
    record_torchao(xs, out)
    out["meta/versions"] = np.array(f"torch {torch.__version__}, torchao {torchao.__version__}")
    np.savez_compressed(args.out, **out)
    print(f"wrote {len(out)} arrays to {args.out}")


if __name__ == "__main__":
    main()
