"""Bit-accurate model of NVIDIA tensor-core dot products (block FMA), GPUs as data.

Model (Fasi et al. 2021; Khattak & Mikaitis 2025; see ``specs/accumulation.md``
ACC-TC-*). One block of ``b`` products plus the addend ``c``:

1. products p_i = a_i * b_i exactly;
2. each product carries the exponent e(a_i) + e(b_i), where e(x) = max(floor(log2|x|),
   emin of the input format) -- no renormalisation of the product significand;
3. E = max(product exponents of nonzero products, exponent of c (fp32 subnormals count
   as -126), L), L the GPU's minimum alignment exponent;
4. every term is truncated toward zero to a multiple of q = 2^(E - f), f the kept
   fraction bits (23 + extra alignment bits); the truncated terms are summed exactly;
5. the sum is rounded toward zero to the output significand (24 bits, or 14 on the
   Ada/Hopper FP8 path) for fp32 output, or to nearest-even for fp16 output.

Longer dot products chain blocks in ascending k order, each block's result being the
next block's addend. NaN/inf operands propagate with IEEE rules. All arithmetic is on
float64 values that are exact: products of <= 11-bit significands, power-of-two scales
and integer multiples of q below 2^53.

Size (about 370 lines): the block-FMA model and its fast GEMM twin, which must stay
bit-identical to it, are kept side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from .cast import quantize
from .exactsum import add_rounded
from .formats import Encoding, Format, get_format

__all__ = ["TensorCoreGPU", "GPUS", "get_gpu", "dot", "block_params", "ACC_E8M13"]

#: fp32 container with a 14-bit significand: the FP8 accumulator of Ada/Hopper
ACC_E8M13 = Format(name="e8m13", exponent_bits=8, mantissa_bits=13, bias=127,
                   encoding=Encoding.IEEE)


@dataclass(frozen=True, kw_only=True)
class Path:
    """Parameters of one input-format family on one GPU."""

    #: products per block (one hardware instruction's k extent)
    block: int
    #: fraction bits kept when aligning to the largest exponent (23 + neab)
    frac_bits: int
    #: significand bits of the fp32-output rounding (24, or 14 for Hopper FP8)
    out_sig_bits: int = 24
    #: rounding of the fp32 result: "toward_zero" (hardware) or "nearest_even"
    out_rounding: str = "toward_zero"
    #: if True the block sums products only, rounds that with ``out_rounding``, and
    #: adds c afterwards in one correctly rounded fp32 addition (``late_rounding``)
    late_addend: bool = False
    late_rounding: str = "nearest_even"


@dataclass(frozen=True, kw_only=True)
class TensorCoreGPU:
    """One GPU generation: a row of data, no code of its own."""

    name: str
    #: input family -> parameters; families: "16bit" (fp16, bf16), "tf32", "fp8"
    paths: dict[str, Path] = field(default_factory=dict)
    #: minimum alignment exponent L for fp32 / fp16 output (None: no limit)
    min_exp_fp32: int | None = None
    min_exp_fp16: int | None = None
    #: input formats this GPU's tensor cores take
    inputs: tuple[str, ...] = ()
    #: where the parameters come from
    source: str = ""


def _row(name: str, *, block16: int, frac_bits: int, block_tf32: int | None = None,
         fp8: Path | None = None, min_exp_fp32: int | None, min_exp_fp16: int,
         source: str) -> TensorCoreGPU:
    """One GPU from its published parameters: the 16-bit path's block and fraction bits,
    the tf32 block (None: no tf32/bf16 path, V100), the FP8 path, the minimum alignment
    exponents L for fp32 and fp16 output."""
    paths = {"16bit": Path(block=block16, frac_bits=frac_bits)}
    if block_tf32 is not None:
        paths["tf32"] = Path(block=block_tf32, frac_bits=frac_bits)
    inputs: tuple[str, ...] = (("float16",) if block_tf32 is None
                               else ("float16", "bfloat16", "tf32"))
    if fp8 is not None:
        paths["fp8"] = fp8
        inputs += ("float8_e4m3fn", "float8_e5m2")
    return TensorCoreGPU(name=name, paths=paths, min_exp_fp32=min_exp_fp32,
                         min_exp_fp16=min_exp_fp16, inputs=inputs, source=source)


_KM = "Khattak & Mikaitis 2025, models/*TC.m"
_HOPPER_FP8 = Path(block=32, frac_bits=13, out_sig_bits=14)
_ADA_FP8 = Path(block=16, frac_bits=13, out_sig_bits=14)
# B200 FP8: the published parameters (block 32, 25 bits, RZ) with c inside the block
# miss ~1800 of the 5000 shipped rows per format. Adding c *after* the RZ-rounded
# product sum, with one round-to-nearest-even fp32 addition, reproduces all 10,000
# (specs/accumulation.md ACC-TC-006).
_B200_FP8 = Path(block=32, frac_bits=25, late_addend=True)

#: GPU name -> model row. Adding a GPU is adding a row.
GPUS: dict[str, TensorCoreGPU] = {g.name: g for g in (
    _row("v100", block16=4, frac_bits=23, min_exp_fp32=None, min_exp_fp16=-19,
         source=_KM + " (V100TC)"),
    _row("a100", block16=8, frac_bits=24, block_tf32=4, min_exp_fp32=-132, min_exp_fp16=-20,
         source=_KM + " (A100TC)"),
    _row("a2", block16=8, frac_bits=24, block_tf32=4, min_exp_fp32=-132, min_exp_fp16=-20,
         source=_KM + " (A100TC, A2 dumps)"),
    _row("ada", block16=8, frac_bits=24, block_tf32=4, fp8=_ADA_FP8, min_exp_fp32=-132,
         min_exp_fp16=-20, source=_KM + " (Ada); L assumed as A100 [unconfirmed]"),
    _row("l40s", block16=8, frac_bits=24, block_tf32=4, fp8=_ADA_FP8, min_exp_fp32=-132,
         min_exp_fp16=-20, source=_KM + " (L40S); L assumed as A100 [unconfirmed]"),
    _row("h100", block16=16, frac_bits=25, block_tf32=8, fp8=_HOPPER_FP8, min_exp_fp32=-133,
         min_exp_fp16=-21, source=_KM + " (H100TC)"),
    _row("h200", block16=16, frac_bits=25, block_tf32=8, fp8=_HOPPER_FP8, min_exp_fp32=-133,
         min_exp_fp16=-21, source=_KM + " (H100TC; same SM as H100)"),
    _row("b200", block16=16, frac_bits=25, block_tf32=8, fp8=_B200_FP8, min_exp_fp32=-133,
         min_exp_fp16=-21, source=_KM + " (B200TC); FP8 row fitted here"),
)}

_FAMILY = {"float16": "16bit", "bfloat16": "16bit", "tf32": "tf32",
           "float8_e4m3fn": "fp8", "float8_e5m2": "fp8"}


def get_gpu(name: str | TensorCoreGPU) -> TensorCoreGPU:
    """Look up a GPU model row by name (case-insensitive).

    Raises:
        ValueError: unknown GPU; the message lists the known ones.
    """
    if isinstance(name, TensorCoreGPU):
        return name
    try:
        return GPUS[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


def block_params(gpu: str | TensorCoreGPU, input_format: str | Format,
                 output_format: str | Format,
                 b_format: str | Format | None = None) -> tuple[Path, int | None, Format, Format]:
    """(path, L, input format, output format) after validating the combination.

    ``b_format`` (default: ``input_format``) is B's format: FP8 MMAs take E4M3 x E5M2 and
    E5M2 x E4M3 on the same path (ACC-TC-007); every other mix is refused."""
    g = get_gpu(gpu)
    fin, fout = get_format(input_format), get_format(output_format)
    fam = _FAMILY.get(fin.name)
    if fam is None:
        raise ValueError(f"tensor cores take fp16, bf16, tf32, e4m3 or e5m2 inputs, got {fin.name}")
    for f in {fin.name, get_format(b_format or fin).name}:
        if f not in g.inputs:
            raise ValueError(f"{g.name} has no {f} tensor-core path; it supports "
                             f"{', '.join(g.inputs)}")
    fb = get_format(b_format or fin)
    if fb.name != fin.name and not (fam == "fp8" and _FAMILY.get(fb.name) == "fp8"):
        raise ValueError(f"mixed operands {fin.name} x {fb.name}: only E4M3 x E5M2 FP8 MMAs "
                         f"exist")
    if fout.name not in ("float32", "float16"):
        raise ValueError(f"output_format must be float32 or float16, got {fout.name}")
    if fout.name == "float16" and fin.name != "float16":
        raise ValueError(f"fp16 output is modelled for fp16 inputs only, got {fin.name}")
    lim = g.min_exp_fp32 if fout.name == "float32" else g.min_exp_fp16
    return g.paths[fam], lim, fin, fout


def _exponents(x: npt.NDArray[Any], emin: int) -> npt.NDArray[Any]:
    """max(floor(log2|x|), emin) for nonzero finite x; -inf for zeros."""
    _, e = np.frexp(x)
    return np.where(x == 0, -np.inf, np.maximum(e - 1, emin).astype(np.float64))


def _round_out(s: npt.NDArray[Any], path: Path, fout: Format) -> npt.NDArray[Any]:
    if fout.name == "float16":
        return quantize(s, fout, "nearest_even")
    acc = ACC_E8M13 if path.out_sig_bits == 14 else get_format("float32")
    return quantize(s, acc, path.out_rounding)


def block_fma(a: npt.NDArray[Any], b: npt.NDArray[Any],
              c: npt.NDArray[Any], path: Path, lim: int | None, fin: Format,
              fout: Format, fin_b: Format | None = None) -> npt.NDArray[Any]:
    """One block: a, b of shape (..., k <= block), c of shape (...); float64 in and out.
    ``fin_b`` is B's format when it differs from A's (mixed FP8)."""
    if path.late_addend:
        products = block_fma(a, b, np.zeros_like(c), replace(path, late_addend=False), lim, fin,
                             fout, fin_b)
        return add_rounded(products, c, get_format("float32"), path.late_rounding)
    p = a * b  # exact
    ep = _exponents(a, fin.minexp) + _exponents(b, (fin_b or fin).minexp)
    ep = np.where(p == 0, -np.inf, ep)  # zero products do not take part in the maximum
    _, ec = np.frexp(c)
    ec = np.where(c == 0, -np.inf, np.maximum(ec - 1, -126).astype(np.float64))
    big = np.maximum(ep.max(axis=-1, initial=-np.inf), ec)
    if lim is not None:
        big = np.maximum(big, lim)
    big = np.where(np.isfinite(big), big, 0.0)  # all-zero block: any quantum works
    inv_q = np.ldexp(1.0, (path.frac_bits - big).astype(np.int64))
    with np.errstate(invalid="ignore"):
        units = np.trunc(p * inv_q[..., None]).sum(axis=-1) + np.trunc(c * inv_q)
        s = units / inv_q
    # specials: IEEE propagation through the exact sum of the raw terms
    with np.errstate(invalid="ignore", over="ignore"):
        raw = p.sum(axis=-1) + c
    s = np.where(np.isfinite(raw), s, raw)
    return _round_out(s, path, fout)


def check_inputs(x: Any, fmt: Format, what: str, quantize_inputs: bool,
                 rounding: str) -> npt.NDArray[Any]:
    """``x`` as float64 after checking that it is an array of at least one dimension (the
    k axis) whose values ``fmt`` represents (or rounding them, with ``quantize_inputs``).

    Raises:
        TypeError: ``x`` is None or not numeric.
        ValueError: 0-d input, or a value ``fmt`` cannot represent (element named).
    """
    if x is None:
        raise TypeError(f"{what} must be an array of numbers, got None")
    try:
        x64 = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what} must be an array of numbers: {e}") from None
    if x64.ndim == 0:
        raise ValueError(f"{what} must have at least one dimension (the k axis of the dot "
                         f"product), got the scalar {float(x64)!r}")
    q = quantize(x64, fmt, rounding)
    if quantize_inputs:
        return q
    bad = ~((q == x64) | (np.isnan(q) & np.isnan(x64)))
    if bad.any():
        i = np.unravel_index(int(np.flatnonzero(bad)[0]), x64.shape)
        where = ", ".join(map(str, i))
        raise ValueError(f"{what}[{where}] = {float(x64[i])!r} is not representable in "
                         f"{fmt.name}; pass quantize_inputs=True to round inputs first")
    return x64


def dot(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None = None, *,
        gpu: str | TensorCoreGPU, input_format: str | Format,
        output_format: str | Format = "float32",
        quantize_inputs: bool = False,
        b_format: str | Format | None = None) -> npt.NDArray[np.float32]:
    """Batched tensor-core dot products d = a . b + c over the last axis.

    Args:
        a, b: arrays of shape (..., K) whose values are representable in
            ``input_format`` (else ``ValueError`` naming the element, unless
            ``quantize_inputs``: tf32 inputs are then truncated as the hardware does,
            others rounded to nearest-even).
        c: addend of shape (...) (default 0); for fp16 output it is first rounded to
            fp16 with nearest-even, as the hardware receives it.
        gpu: a name from :data:`GPUS`.
        b_format: B's format if it differs from ``input_format`` (E4M3 x E5M2).

    Returns:
        float32 array of shape (...): the model's result (fp16 results widened exactly).
    """
    path, lim, fin, fout = block_params(gpu, input_format, output_format, b_format)
    fb = get_format(b_format or fin)
    rounding = "toward_zero" if fin.name == "tf32" else "nearest_even"
    a64 = check_inputs(a, fin, "a", quantize_inputs, rounding)
    b64 = check_inputs(b, fb, "b", quantize_inputs, rounding)
    if a64.shape != b64.shape:
        a64, b64 = np.broadcast_arrays(a64, b64)
    k = a64.shape[-1] if a64.ndim else 0
    lead = a64.shape[:-1]
    d = np.zeros(lead) if c is None else np.broadcast_to(np.asarray(c, np.float64), lead).copy()
    d = quantize(d, fout) if fout.name == "float16" else quantize(d, "float32")
    for k0 in range(0, max(k, 1), path.block):
        d = block_fma(a64[..., k0:k0 + path.block], b64[..., k0:k0 + path.block], d, path,
                      lim, fin, fout, fb)
    return _canonical(d)


#: NaN results are canonicalised to CUDA's canonical float NaN (ACC-TC-005)
CANONICAL_NAN = np.array([0x7FFFFFFF], dtype=np.uint32).view(np.float32)[0]


def _canonical(d: Any) -> npt.NDArray[np.float32]:
    out = np.asarray(d).astype(np.float32)
    return np.where(np.isnan(out), CANONICAL_NAN, out)


def _int_exponents(x: npt.NDArray[Any], emin: int) -> npt.NDArray[np.int16]:
    """max(floor(log2|x|), emin) as int16; zeros get -16000 (below every real exponent)."""
    _, e = np.frexp(x)
    return np.where(x == 0, -16000, np.maximum(e - 1, emin)).astype(np.int16)


def _work_dtype(fin: Format) -> Any:
    """float32 if every product of two inputs is exact and normal in float32 (fp16, fp8)."""
    lo = 2 * (fin.minexp - fin.mantissa_bits)
    hi = 2 * (fin.maxexp_value + 1)
    ok = 2 * fin.precision_bits <= 24 and lo >= -126 and hi <= 127
    return np.float32 if ok else np.float64


def gemm(A: npt.NDArray[Any], BT: npt.NDArray[Any], C: npt.NDArray[Any],
         *, gpu: str | TensorCoreGPU, input_format: str | Format,
         output_format: str | Format = "float32", threads: int = 2,
         tile_rows: int = 32, b_format: str | Format | None = None) -> npt.NDArray[np.float32]:
    """D = A @ B + C with B given transposed (N, K); inputs already validated.

    Each D[i, j] equals :func:`dot` (A[i], BT[j], C[i, j]) bit for bit: blocks of k
    ascending, block by block. The same block algorithm as :func:`block_fma`, organised
    for speed: exponents are computed once as int16 (their maximum is a (max, +)
    product), products and their truncation to quanta run in float32 when every product
    of two inputs is exact there, and the integer quanta are summed in float64. Row
    tiles run on ``threads`` threads (NumPy releases the GIL in ufuncs).
    """
    path, lim, fin, fout = block_params(gpu, input_format, output_format, b_format)
    fb = get_format(b_format or fin)
    M, K = A.shape
    N = BT.shape[0]
    D0 = quantize(np.asarray(C, np.float64), fout if fout.name == "float16" else "float32")
    if K == 0:  # no products: the addend, as dot gives it
        return dot(np.zeros((M, N, 0)), np.zeros((M, N, 0)), D0, gpu=gpu, input_format=fin,
                   output_format=fout, b_format=fb)
    out = np.empty((M, N), dtype=np.float32)
    if not (np.isfinite(A).all() and np.isfinite(BT).all() and np.isfinite(D0).all()):
        for i in range(M):  # specials: the plain per-row model, IEEE propagation included
            out[i] = dot(A[i][None, :], BT, D0[i], gpu=gpu, input_format=fin, output_format=fout,
                         b_format=fb)
        return out
    wt = np.promote_types(_work_dtype(fin), _work_dtype(fb))
    # k-major layout: every ufunc below runs over long contiguous (rows, N) slabs
    At, B = np.ascontiguousarray(A.T).astype(wt), np.ascontiguousarray(BT.T).astype(wt)
    ea = _int_exponents(np.ascontiguousarray(A.T), fin.minexp)
    eb = _int_exponents(np.ascontiguousarray(BT.T), fb.minexp)
    e_floor = fin.minexp + fb.minexp  # smallest exponent of a nonzero product
    blocks = [(k0, min(k0 + path.block, K)) for k0 in range(0, max(K, 1), path.block)]

    def tile(i: int) -> None:
        r = slice(i, i + tile_rows)
        d = D0[r]
        rows = d.shape[0]
        # per-tile scratch, reused by every block: no allocation (page faults) per block
        pbuf = np.empty((path.block, rows, N), dtype=wt)
        ebuf = np.empty((path.block, rows, N), dtype=np.int16)
        for k0, k1 in blocks:
            n = k1 - k0
            d = _gemm_block(At[k0:k1, r, None], B[k0:k1, None, :], ea[k0:k1, r, None],
                            eb[k0:k1, None, :], d, path, lim, fout, e_floor,
                            pbuf[:n], ebuf[:n])
        out[r] = _canonical(d)

    starts = range(0, M, tile_rows)
    if threads > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(tile, starts))
    else:
        for i in starts:
            tile(i)
    return out


def _gemm_block(a: Any, b: Any, ea: Any, eb: Any, d: npt.NDArray[Any], path: Path,
                lim: int | None, fout: Format, e_floor: int, pbuf: Any,
                ebuf: Any) -> npt.NDArray[Any]:
    """One k-block for a tile of outputs (same algorithm as :func:`block_fma`).

    a: (k, rows, 1), b: (k, 1, N) and their int16 exponents; d: (rows, N) float64.
    """
    late = path.late_addend
    addend = np.zeros_like(d) if late else d
    E = np.add(ea, eb, out=ebuf).max(axis=0).astype(np.int32)  # zero products near -32000
    _, ec = np.frexp(addend)
    ec = np.where(addend == 0, -16000, np.maximum(ec - 1, -126))
    E = np.maximum(E, ec)
    if lim is not None:
        E = np.maximum(E, lim)
    E = np.maximum(E, min(e_floor, -126))  # all-zero blocks: any finite quantum works
    inv_q = np.ldexp(1.0, path.frac_bits - E)
    p = np.multiply(a, b, out=pbuf)
    p *= inv_q if p.dtype == np.float64 else \
        np.ldexp(np.float32(1), path.frac_bits - np.maximum(E, e_floor))
    np.trunc(p, out=p)
    units = p.sum(axis=0, dtype=np.float64)
    if not late:
        units += np.trunc(addend * inv_q)
    res = _round_out(units / inv_q, path, fout)
    if late:
        res = add_rounded(res, d, get_format("float32"), path.late_rounding)
    return res
