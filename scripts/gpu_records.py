"""Record what a GPU computes and compare it with ampref's models, in one run (part of
``scripts/gpu_check.sh``; ``docs/gpu-validation.md`` says what each part found).

    python3 scripts/gpu_records.py --out DIR [--device cuda|cpu]
                                   [--part gemm,splitk,chain,autocast]

Parts:

* ``gemm``: every library GEMM flavour torch calls (``torch.mm`` fp16/bf16 with float32
  and 16-bit outputs, TF32 on TF32-exact and on full float32 operands, SGEMM,
  ``torch._scaled_mm`` e4m3 and e5m2 with and without fast accumulation) on operands no
  earlier run had (:data:`BATTERY_SEED`, :data:`RANDOM_SEED`): the identify battery at
  K = 32, 128, 2048, and larger shapes (64 x K @ K x 96 with K = 200, 1000; 8 x 8192 @
  8192 x 8, where cuBLAS may split K). Each output is compared with ``cublas:<gpu>``
  (``:fast-accum``, ``:tf32``), bitwise; TF32 and SGEMM, which cuBLAS runs split-K from
  K = 16 on, with the slice counts S in 1..128 that reproduce them and ACC-BND-003's
  bound; inputs and outputs go to ``gemm_records.npz`` for the tests.
* ``splitk``: long-K GEMMs with small M x N (where cuBLAS picks split-K kernels; ACC-LIB-006)
  on fresh operands, fp16/bf16 -> float32 and e4m3 with and without fast accumulation;
  for each, the slice counts S in 1..64 for which ``cublas:<gpu>[:fast-accum]:split-k=S``
  reproduces every element (S is cuBLAS's heuristic choice; the rule is the slicing and
  the float32 reduction). Outputs to ``splitk_records.npz``.
* ``chain`` (CUDA only): cuBLAS fp16/bf16 -> float32 against ampref's chain kernel
  (``tensorcore:<gpu>``) on large shapes up to 4096^3, bitwise: the evidence a library
  fast path for that model needs (:data:`CHAIN_SHAPES`).
* ``autocast``: one training step of each model of ``tests/bridge/zoo.py`` under the real
  ``torch.autocast("cuda", dtype)``, its aten ops (name, output dtypes, floating input
  shapes) logged below autograd, to ``autocast_traces.json``: the oracle for ampref's
  CUDA lists on CPU tensors (the same ops must come out of emulate).

``--device cpu`` runs the same code on the CPU (a dry run: torch's CPU kernels are not
what the models describe). Everything goes to ``--out``; the summary is printed and
written to ``records.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
T = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32,
     "tf32": torch.float32, "float8_e4m3fn": torch.float8_e4m3fn,
     "float8_e5m2": torch.float8_e5m2}


def _mm(dev: str, fin: str, out32: bool, tf32: bool = False) -> Callable[[Any, Any], Any]:
    def run(a: Any, b: Any) -> Any:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        A = torch.from_numpy(np.asarray(a, np.float32)).to(dev).to(T[fin])
        B = torch.from_numpy(np.asarray(b, np.float32)).to(dev).to(T[fin])
        C = torch.mm(A, B, out_dtype=torch.float32) if out32 and fin in ("float16", "bfloat16") \
            else torch.mm(A, B)
        return C.float().cpu().numpy()
    return run


def _scaled(dev: str, fin: str, fast: bool) -> Callable[[Any, Any], Any]:
    def run(a: Any, b: Any) -> Any:
        M, K = a.shape
        N = b.shape[1]
        Mp, Np, Kp = (-(-v // 16) * 16 for v in (M, N, K))
        A = torch.zeros(Mp, Kp)
        A[:M, :K] = torch.from_numpy(np.asarray(a, np.float32))
        B = torch.zeros(Kp, Np)
        B[:K, :N] = torch.from_numpy(np.asarray(b, np.float32))
        A8 = A.to(dev).to(T[fin])
        B8 = B.to(dev).to(T[fin]).t().contiguous().t()
        one = torch.tensor(1.0, device=dev)
        C = torch._scaled_mm(A8, B8, scale_a=one, scale_b=one, out_dtype=torch.float32,
                             use_fast_accum=fast)
        return C[:M, :N].float().cpu().numpy()
    return run


def flavours(dev: str, gpu: str) -> dict[str, tuple[str, str, str, Callable[..., Any]]]:
    """name -> (input format, output format, ampref model, the GEMM on ``dev``)."""
    lib = f"cublas:{gpu}"
    out: dict[str, tuple[str, str, str, Callable[..., Any]]] = {}
    for f, short in (("float16", "fp16"), ("bfloat16", "bf16")):
        out[f"torch.mm {short}->fp32"] = (f, "float32", lib, _mm(dev, f, True))
        out[f"torch.mm {short}->{short}"] = (f, f, lib, _mm(dev, f, False))
    out["torch.mm tf32->fp32"] = ("tf32", "float32", lib, _mm(dev, "tf32", True, True))
    # float32 operands with low fraction bits set, TF32 allowed: how cuBLAS turns them
    # into TF32 (ACC-LIB-004 assumes the low 13 bits are ignored)
    out["torch.mm fp32 operands, tf32 on"] = ("float32", "float32", lib + ":tf32",
                                              _mm(dev, "float32", True, True))
    out["torch.mm fp32 (no tf32)"] = ("float32", "float32", lib, _mm(dev, "float32", True))
    for f in ("float8_e4m3fn", "float8_e5m2"):
        out[f"_scaled_mm {f} fast_accum"] = (f, "float32", lib + ":fast-accum",
                                             _scaled(dev, f, True))
        out[f"_scaled_mm {f}"] = (f, "float32", lib, _scaled(dev, f, False))
    return out


#: operand seeds: run 2 recorded the battery's seed 2 and default_rng(5); each run takes
#: fresh ones so its operands were never fitted on
BATTERY_SEED, RANDOM_SEED = 3, 7


def operands(fin: str) -> list[tuple[str, Any, Any]]:
    """(tag, a, b): the battery with :data:`BATTERY_SEED` (never recorded), and larger
    shapes."""
    import ampref
    from ampref.accumulation.identify import gemm_battery

    cases = [(f"battery k={k} #{i}", a, b) for k in (32, 128, 2048)
             for i, (a, b) in enumerate(gemm_battery(fin, seed=BATTERY_SEED, k=k))]
    rng = np.random.default_rng(RANDOM_SEED)
    fmt = "float32" if fin == "float32" else fin
    for m, k, n in ((64, 200, 96), (64, 1000, 96), (8, 8192, 8)):
        a = ampref.quantize(rng.standard_normal((m, k)).astype(np.float32), fmt,
                            saturate=True).astype(np.float64)
        b = ampref.quantize(rng.standard_normal((k, n)).astype(np.float32), fmt,
                            saturate=True).astype(np.float64)
        cases.append((f"random {m}x{k}x{n}", a, b))
    return cases


def part_gemm(dev: str, gpu: str, out: Path) -> dict[str, Any]:
    from ampref.accumulation import models

    summary: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    for name, (fin, fout, model, run) in flavours(dev, gpu).items():
        row: dict[str, Any] = {"input": fin, "output": fout, "model": model, "cases": {}}
        t0 = time.time()
        for tag, a, b in operands(fin):
            try:
                got = np.asarray(run(a, b), np.float32)
            except Exception as e:  # noqa: BLE001 - a flavour the device lacks
                row["cases"][tag] = f"not run: {type(e).__name__}: {str(e)[:120]}"
                continue
            key = f"{name}|{tag}"
            arrays[key + "|a"], arrays[key + "|b"] = a.astype(np.float32), b.astype(np.float32)
            arrays[key + "|out"] = got
            if fin in ("tf32", "float32"):  # split-K from K = 16 on: name the counts
                exact = models.dot(a[:, None, :], b.T[None, :, :], accumulation="exact",
                                   input_format=fin, output_format="float64")
                bound = models.error_bound(a[:, None, :], b.T[None, :, :], accumulation=model,
                                           input_format=fin)
                ratio = float(np.max(np.abs(got - np.asarray(exact)) / np.maximum(bound, 1e-300)))
                fits = split_fits(got, a, b, fin, model)
                row["cases"][tag] = (f"max error / bound {ratio:.3f}; split-k fits "
                                     f"{fits if fits else 'none'}")
            else:
                want = np.asarray(models.matmul(a, b, input_format=fin, output_format=fout,
                                                accumulation=model), np.float32)
                bad = int(np.sum(got.view(np.uint32) != want.view(np.uint32)))
                row["cases"][tag] = f"{bad}/{got.size} differ"
        row["seconds"] = round(time.time() - t0, 1)
        summary[name] = row
        print(f"gemm {name} vs {model}: {_digest(row['cases'])}", flush=True)
    np.savez_compressed(out / "gemm_records.npz", **arrays)
    return summary


def split_fits(got: Any, a: Any, b: Any, fin: str, model: str, most: int = 128) -> list[int]:
    """The slice counts S in 1..``most`` for which ``model:split-k=S`` reproduces ``got``
    bitwise, each distinct slicing computed once (counts giving the same slices share
    one result)."""
    from ampref.accumulation import models
    from ampref.accumulation.library import split_bounds
    from ampref.accumulation.registry import LIBRARY_GPUS, resolve

    granule = LIBRARY_GPUS[str(resolve(model).gpu)].granule(
        "tf32" if fin == "tf32" or ":tf32" in model else fin)
    seen: dict[tuple[tuple[int, int], ...], bool] = {}
    fits = []
    for split in range(1, most + 1):
        key = tuple(split_bounds(a.shape[1], split, granule))
        if key not in seen:
            want = np.asarray(models.matmul(a, b, input_format=fin,
                                            accumulation=f"{model}:split-k={split}"), np.float32)
            seen[key] = bool(np.array_equal(got.view(np.uint32), want.view(np.uint32)))
        if seen[key]:
            fits.append(split)
    return fits


#: long-K shapes; four have K not a multiple of 8 (rows not 16-byte aligned for
#: fp16/bf16), where run 2's one such GEMM (8x12345x8) fitted no rule: they pin the
#: unaligned kernels' slicing and block (ACC-LIB-006's finding); the last six test
#: :func:`split_hypothesis` where it changes its count (K = 2728 | 2736 and 5456 | 5464)
#: and with more than one output tile
SPLITK_SHAPES = ((8, 4096, 8), (8, 8192, 8), (8, 16384, 8), (16, 8192, 16), (32, 4096, 32),
                 (64, 8192, 64), (8, 3000, 8), (8, 12345, 8), (8, 4099, 8), (8, 8198, 8),
                 (16, 6004, 16), (8, 1001, 8), (8, 2728, 8), (8, 2736, 8), (8, 5456, 8),
                 (8, 5464, 8), (128, 8192, 128), (256, 4096, 256))


def split_hypothesis(k: int, fin: str) -> int:
    """cuBLAS's split count as guessed, not modelled: max(1, floor(3·K·bytes/8192)) with
    K as the GEMM ran (FP8 padded to a multiple of 16 by :func:`_scaled`). A fit to run
    2's 15 single-output-tile shapes (ACC-LIB-006's note), so each run's fresh shapes are
    its test; recorded next to the counts that fit."""
    fp8 = fin.startswith("float8")
    ran = -(-k // 16) * 16 if fp8 else k
    return max(1, 3 * ran * (1 if fp8 else 2) // 8192)


def part_splitk(dev: str, gpu: str, out: Path) -> dict[str, Any]:
    import ampref

    rng = np.random.default_rng(11)
    picks = {"torch.mm fp16->fp32": ("float16", ""), "torch.mm bf16->fp32": ("bfloat16", ""),
             "_scaled_mm float8_e4m3fn fast_accum": ("float8_e4m3fn", ":fast-accum"),
             "_scaled_mm float8_e4m3fn": ("float8_e4m3fn", "")}
    runs = flavours(dev, gpu)
    summary: dict[str, Any] = {}
    arrays: dict[str, Any] = {}
    for m, k, n in SPLITK_SHAPES:
        a32 = rng.standard_normal((m, k)).astype(np.float32)
        b32 = rng.standard_normal((k, n)).astype(np.float32)
        for name, (fin, option) in picks.items():
            a = ampref.quantize(a32, fin, saturate=True).astype(np.float64)
            b = ampref.quantize(b32, fin, saturate=True).astype(np.float64)
            tag = f"{name}|{m}x{k}x{n}"
            try:
                got = np.asarray(runs[name][3](a, b), np.float32)
            except Exception as e:  # noqa: BLE001 - a flavour the device lacks
                summary[tag] = f"not run: {type(e).__name__}: {str(e)[:120]}"
                continue
            arrays[tag + "|a"], arrays[tag + "|b"] = a.astype(np.float32), b.astype(np.float32)
            arrays[tag + "|out"] = got
            fits = split_fits(got, a, b, fin, f"cublas:{gpu}{option}", 64)
            guess = split_hypothesis(k, fin)
            summary[tag] = (f"split-k fits {fits}" if fits else "no split-k count fits") + \
                f"; hypothesis S={guess} {'fits' if guess in fits else 'does not fit'}"
            print(f"splitk {tag}: {summary[tag]}", flush=True)
    np.savez_compressed(out / "splitk_records.npz", **arrays)
    return summary


#: large GEMMs where the library call would be the fast path of ``tensorcore:<gpu>``
#: (issue 39: the chain kernel ran at 0.047x cuBLAS fp16 at 4096^3) if cuBLAS equals the
#: chain on them; the small-M x N long-K shape is where cuBLAS splits K (ACC-LIB-006)
CHAIN_SHAPES = ((128, 128, 128), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
                (4096, 4096, 4096), (4096, 1024, 4096), (1024, 4096, 1024), (512, 768, 3072),
                (64, 8192, 64))


def part_chain(dev: str, gpu: str, out: Path) -> dict[str, Any]:
    """cuBLAS fp16/bf16 -> float32 (``torch.mm``) against ampref's chain kernel on the
    device (``tensorcore:<gpu>``, proven equal to the block-FMA model by the GPU tests)
    on large shapes, bitwise: where they agree on every element, the shape class a
    library fast path could serve. Fresh operands (``default_rng(13)``)."""
    import cupy

    import ampref
    from ampref import backends

    be = backends.get("cupy")
    rng = np.random.default_rng(13)
    summary: dict[str, Any] = {}
    for m, k, n in CHAIN_SHAPES:
        a32 = rng.standard_normal((m, k)).astype(np.float32)
        b32 = rng.standard_normal((k, n)).astype(np.float32)
        for fin, short in (("float16", "fp16"), ("bfloat16", "bf16")):
            tag = f"{short} {m}x{k}x{n}"
            a = ampref.quantize(a32, fin, saturate=True)
            b = ampref.quantize(b32, fin, saturate=True)
            t0 = time.time()
            try:
                lib = _mm(dev, fin, True)(a, b)
                chain = cupy.asnumpy(be.matmul(cupy.asarray(a), cupy.asarray(b),
                                               f"tensorcore:{gpu}", fin))
            except Exception as e:  # noqa: BLE001 - record and go on
                summary[tag] = f"not run: {type(e).__name__}: {str(e)[:120]}"
                continue
            bad = int(np.sum(np.asarray(lib, np.float32).view(np.uint32)
                             != np.asarray(chain, np.float32).view(np.uint32)))
            summary[tag] = f"{bad}/{lib.size} differ ({time.time() - t0:.1f} s)"
            print(f"chain {tag}: cuBLAS vs tensorcore:{gpu} {summary[tag]}", flush=True)
    return summary


def part_autocast(dev: str, out: Path) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT / "tests" / "bridge"))
    from torch.utils._python_dispatch import TorchDispatchMode

    import zoo

    class OpLog(TorchDispatchMode):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.ops: list[Any] = []

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                               kwargs: Any = None) -> Any:
            res = func(*args, **(kwargs or {}))
            outs = res if isinstance(res, (list, tuple)) else [res]
            self.ops.append([func.overloadpacket.__name__,
                             [str(o.dtype) for o in outs if isinstance(o, torch.Tensor)],
                             [list(a.shape) for a in args if isinstance(a, torch.Tensor)
                              and a.dtype.is_floating_point]])
            return res

    traces: dict[str, Any] = {}
    for name in zoo.NAMES:
        for dtype in ("bfloat16", "float16"):
            c = zoo.case(name)
            model = c.model.to(dev)
            torch.manual_seed(1)
            try:
                with OpLog() as log:
                    with torch.autocast(dev, getattr(torch, dtype)):
                        loss = c.loss(model(_to(c.inputs, dev)))
                    loss.backward()
                traces[f"{name}|{dtype}"] = log.ops
            except Exception as e:  # noqa: BLE001 - recorded as not run
                traces[f"{name}|{dtype}"] = f"not run: {type(e).__name__}: {str(e)[:160]}"
            print(f"autocast {name} {dtype}: {len(traces[f'{name}|{dtype}'])} ops", flush=True)
    (out / "autocast_traces.json").write_text(json.dumps(
        {"torch": torch.__version__, "device": _device_name(dev), "traces": traces}) + "\n")
    return {k: (len(v) if isinstance(v, list) else v) for k, v in traces.items()}


def _digest(cases: dict[str, str]) -> str:
    """One line per flavour: elements that differ over all cases, or the worst error /
    bound ratio and the cases no slice count reproduces, and the cases that did not run."""
    diff = [c.split()[0].split("/") for c in cases.values() if c.endswith("differ")]
    bounded = [c for c in cases.values() if c.startswith("max error")]
    ratios = [float(c.split(";")[0].split()[-1]) for c in bounded]
    unsplit = sum(c.endswith("fits none") for c in bounded)
    skipped = sum(c.startswith("not run") for c in cases.values())
    parts = []
    if diff:
        parts.append(f"{sum(int(d[0]) for d in diff)}/{sum(int(d[1]) for d in diff)} "
                     f"elements differ in {len(diff)} cases")
    if ratios:
        parts.append(f"worst error / bound {max(ratios):.3f} in {len(ratios)} cases, "
                     f"{len(ratios) - unsplit} reproduced by a split-k count")
    if skipped:
        parts.append(f"{skipped} cases not run")
    return "; ".join(parts)


def _to(x: Any, dev: str) -> Any:
    return x.to(dev) if isinstance(x, torch.Tensor) else x


def _device_name(dev: str) -> str:
    return torch.cuda.get_device_name() if dev == "cuda" else platform.processor() or "cpu"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    choices=("cuda", "cpu"))
    ap.add_argument("--gpu", default="h100", help="ampref's library model to compare with")
    ap.add_argument("--part", default="gemm,autocast")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    parts = [p.strip() for p in args.part.split(",") if p.strip()]
    unknown = sorted(set(parts) - {"gemm", "splitk", "chain", "autocast"})
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; choose gemm, splitk, chain, autocast")
    summary: dict[str, Any] = {"device": _device_name(args.device), "torch": torch.__version__,
                               "cuda": torch.version.cuda, "python": platform.python_version()}
    if "gemm" in parts:
        summary["gemm"] = part_gemm(args.device, args.gpu, out)
    if "splitk" in parts:
        summary["splitk"] = part_splitk(args.device, args.gpu, out)
    if "chain" in parts:
        if args.device != "cuda":
            ap.error("--part chain needs --device cuda (the chain kernel runs on CuPy)")
        summary["chain"] = part_chain(args.device, args.gpu, out)
    if "autocast" in parts:
        summary["autocast"] = part_autocast(args.device, out)
    (out / "records.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
