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

The GPU rows and the switchable rules are data in :mod:`ampref.accumulation.gpus`. Size (about 330
lines): the block-FMA model and its fast GEMM twin, which must stay bit-identical to it,
are kept side by side.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref import kernels
from ampref.common.checks import check_count, check_flag, real_array
from ampref.kernels.arrays import frozen
from ampref.formats.cast import quantize, value_table
from ampref.formats.rounding import get_rounding
from ampref.formats.exactsum import add_rounded, fma64
from ampref.formats.table import Format, get_format
from .gpus import (
    ACC_E8M13,
    AMPREF_RULES,
    GPUS,
    Path,
    Rules,
    TensorCoreGPU,
    block_params,
    get_gpu,
    get_rules,
)

__all__ = ["TensorCoreGPU", "Path", "GPUS", "get_gpu", "dot", "gemm", "block_params",
           "ACC_E8M13", "Rules", "check_inputs", "exponents", "tf32_words", "CANONICAL_NAN",
           "CANONICAL_NAN64"]


def exponents(x: npt.NDArray[Any], emin: int, zero: int | None) -> npt.NDArray[Any]:
    """max(floor(log2|x|), emin) for nonzero finite x, as float64; zeros get ``zero``
    (None: -inf, so they never set a maximum; -126: MMA-Sim's convention)."""
    _, e = np.frexp(x)
    z = -np.inf if zero is None else float(zero)
    return np.where(x == 0, z, np.maximum(e - 1, emin).astype(np.float64))


def _round_out(s: npt.NDArray[Any], path: Path, fout: Format,
               rules: Rules = AMPREF_RULES) -> npt.NDArray[Any]:
    if fout.name == "float16":
        out = quantize(s, fout, "nearest_even")
    else:
        acc = ACC_E8M13 if path.out_sig_bits == 14 else get_format("float32")
        out = quantize(s, acc, path.out_rounding)
        if rules.overflow == "inf":  # RZ beyond the fp32 range gives inf, not FLT_MAX
            out = np.where(np.abs(s) >= 2.0**128, np.copysign(np.inf, s), out)
    if rules.zero_sign == "positive":
        out = np.where(out == 0, 0.0, out)
    return out


def block_fma(a: npt.NDArray[Any], b: npt.NDArray[Any],
              c: npt.NDArray[Any], path: Path, lim: int | None, fin: Format,
              fout: Format, fin_b: Format | None = None,
              rules: Rules = AMPREF_RULES) -> npt.NDArray[Any]:
    """One block: a, b of shape (..., k <= block), c of shape (...); float64 in and out.
    ``fin_b`` is B's format when it differs from A's (mixed FP8); ``rules`` the
    undecided conventions (ACC-TC-008)."""
    if path.late_addend and rules.late_addend and fout.name == "float32":
        products = block_fma(a, b, np.zeros_like(c), replace(path, late_addend=False), lim, fin,
                             fout, fin_b, rules)
        return add_rounded(products, c, get_format("float32"), path.late_rounding)
    zero = rules.zero_exponent
    with np.errstate(invalid="ignore"):  # inf * 0: NaN, as IEEE says
        p = a * b  # exact
    ep = exponents(a, fin.minexp, zero) + exponents(b, (fin_b or fin).minexp, zero)
    if zero is None:
        ep = np.where(p == 0, -np.inf, ep)  # zero products do not take part in the maximum
    c_floor = -14 if fout.name == "float16" and rules.fp16_addend_floor == "float16" else -126
    ec = exponents(c, c_floor, zero)
    big = np.maximum(ep.max(axis=-1, initial=-np.inf), ec)
    if lim is not None and rules.alignment_floor:
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
    return np.where(np.isfinite(raw), _round_out(s, path, fout, rules), raw)


def check_inputs(x: Any, fmt: Format, what: str, quantize_inputs: bool,
                 rounding: str, advice: str = "pass quantize_inputs=True to round inputs "
                 "first") -> npt.NDArray[Any]:
    """``x`` as float64 after checking that it is an array of at least one dimension (the
    k axis) whose values ``fmt`` represents (or rounding them, with ``quantize_inputs``).

    Raises:
        TypeError: ``x`` is None or not numeric.
        ValueError: 0-d input, or a value ``fmt`` cannot represent (element named).
        TypeError: ``quantize_inputs`` is not a bool.
    """
    quantize_inputs = check_flag("quantize_inputs", quantize_inputs)
    if x is None:
        raise TypeError(f"{what} must be an array of numbers, got None")
    kind = np.asarray(x).dtype.kind
    if kind not in "fiub":  # complex would drop its imaginary part, objects hide anything
        raise TypeError(f"{what} must be an array of real numbers (float, int or bool), got "
                        f"dtype {np.asarray(x).dtype}")
    try:
        with np.errstate(invalid="ignore"):  # a signalling NaN widens to a quiet one
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
                         f"{fmt.name}; {advice}")
    return x64


def tf32_words(x: Any) -> npt.NDArray[np.float64]:
    """fp32 words with their low 13 bits cleared (MMA-Sim's tf32 inputs): values truncate
    toward zero, and a NaN whose payload lies only in those bits becomes +-inf."""
    words = np.asarray(x, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)
    return words.view(np.float32).astype(np.float64)


def dot(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None = None, *,
        gpu: str | TensorCoreGPU, input_format: str | Format,
        output_format: str | Format = "float32",
        quantize_inputs: bool = False,
        b_format: str | Format | None = None,
        rules: str | Rules | None = None) -> npt.NDArray[Any]:
    """Batched tensor-core dot products d = a . b + c over the last axis.

    Args:
        a, b: arrays of shape (..., K) whose values are representable in
            ``input_format`` (else ``ValueError`` naming the element, unless
            ``quantize_inputs``: tf32 inputs are then truncated as the hardware does,
            others rounded to nearest-even).
        c: addend of shape (...) (default 0); for fp16 output it is first rounded to
            fp16 with nearest-even, as the hardware receives it.
        gpu: a name from :data:`GPUS`.
        b_format: B's format if it differs from ``input_format`` (the FP8/FP6/FP4
            family mixes: E4M3 x E5M2, and on Blackwell E2M1/E2M3/E3M2 too).
        rules: the undecided conventions (ACC-TC-008): ``"ampref"`` (default),
            ``"mmasim"`` or a :class:`Rules`.

    Returns:
        float32 array of shape (...): the model's result (fp16 results widened exactly);
        float64 for float64 inputs (DMMA: a chain of correctly rounded FMAs, ACC-TC-010).
    """
    path, lim, fin, fout = block_params(gpu, input_format, output_format, b_format)
    fb, rl = get_format(b_format or fin), get_rules(rules)
    rounding = "toward_zero" if fin.name == "tf32" else "nearest_even"
    if fin.name == "tf32" and rl.tf32_words:
        a64, b64 = tf32_words(a), tf32_words(b)
    else:
        a64 = check_inputs(a, fin, "a", quantize_inputs, rounding)
        b64 = check_inputs(b, fb, "b", quantize_inputs, rounding)
    if a64.shape != b64.shape:
        a64, b64 = np.broadcast_arrays(a64, b64)
    k = a64.shape[-1] if a64.ndim else 0
    lead = a64.shape[:-1]
    d = np.zeros(lead) if c is None else np.broadcast_to(
        real_array("c", c).astype(np.float64), lead).copy()
    d = quantize(d, fout) if fout.name != "float32" else quantize(d, "float32")
    if path.fma_chain:  # DMMA: k ascending, one rounding per FMA
        for i in range(k):
            d = fma64(a64[..., i], b64[..., i], d)
        return np.where(np.isnan(d), CANONICAL_NAN64, d)
    for k0 in range(0, max(k, 1), path.block):
        d = block_fma(a64[..., k0:k0 + path.block], b64[..., k0:k0 + path.block], d, path,
                      lim, fin, fout, fb, rl)
    return _canonical(d)


#: NaN results are canonicalised to CUDA's canonical float NaN (ACC-TC-005)
CANONICAL_NAN = np.array([0x7FFFFFFF], dtype=np.uint32).view(np.float32)[0]
#: and to CUDA's canonical double NaN for DMMA (assumption, ACC-TC-010)
CANONICAL_NAN64 = np.array([0x7FFFFFFFFFFFFFFF], dtype=np.uint64).view(np.float64)[0]


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


def _gemm_operands(A: Any, BT: Any, C: Any) -> tuple[Any, Any, Any]:
    """A (M, K), BT (N, K) and C (M, N) as real arrays of those shapes, or a named error."""
    out = []
    for name, v in (("A", A), ("BT", BT), ("C", C)):
        arr = None if v is None else np.asarray(v)
        if arr is None or arr.dtype.kind not in "fiub":
            got = type(v).__name__ if arr is None else f"dtype {arr.dtype}"
            raise TypeError(f"gemm: {name} must be an array of real numbers, got {got}")
        out.append(arr)
    a, bt, c = out
    if a.ndim != 2 or bt.ndim != 2 or a.shape[1] != bt.shape[1]:
        raise ValueError(f"gemm: A must be (M, K) and BT (N, K) with one K, got {a.shape} and "
                         f"{bt.shape}")
    if c.shape != (a.shape[0], bt.shape[0]):
        raise ValueError(f"gemm: C must be (M, N) = {(a.shape[0], bt.shape[0])}, got {c.shape}")
    return a, bt, c


def gemm(A: npt.NDArray[Any], BT: npt.NDArray[Any], C: npt.NDArray[Any],
         *, gpu: str | TensorCoreGPU, input_format: str | Format,
         output_format: str | Format = "float32", threads: int = 2,
         tile_rows: int = 64, b_format: str | Format | None = None,
         rules: str | Rules | None = None) -> npt.NDArray[Any]:
    """D = A @ B + C with B given transposed (N, K); inputs already validated.

    Each D[i, j] equals :func:`dot` (A[i], BT[j], C[i, j]) bit for bit: blocks of k
    ascending, block by block. The same block algorithm as :func:`block_fma`, organised
    for speed: exponents are computed once as int16 (their maximum is a (max, +)
    product), products and their truncation to quanta run in float32 when every product
    of two inputs is exact there, and the integer quanta are summed in float64. Row
    tiles run on ``threads`` threads (NumPy releases the GIL in ufuncs). Rules other
    than ampref's, DMMA and inputs with NaN/inf take the per-row :func:`dot` instead.
    """
    # why long: the fast organisation of the block model: the per-row fallback test, layout,
    # exponent precomputation and the threaded tile loop belong together
    threads, tile_rows = check_count("threads", threads), check_count("tile_rows", tile_rows)
    path, lim, fin, fout = block_params(gpu, input_format, output_format, b_format)
    fb, rl = get_format(b_format or fin), get_rules(rules)
    A, BT, C = _gemm_operands(A, BT, C)
    M, K = A.shape
    N = BT.shape[0]
    D0 = quantize(real_array("C", C).astype(np.float64),
                  fout if fout.name != "float32" else "float32")
    if K == 0:  # no products: the addend, as dot gives it
        return dot(np.zeros((M, N, 0)), np.zeros((M, N, 0)), D0, gpu=gpu, input_format=fin,
                   output_format=fout, b_format=fb, rules=rl)
    out = np.empty((M, N), dtype=np.float64 if path.fma_chain else np.float32)
    if (rl != AMPREF_RULES or path.fma_chain or not (
            np.isfinite(A).all() and np.isfinite(BT).all() and np.isfinite(D0).all())):
        for i in range(M):  # the plain per-row model: specials, other rules, FMA chains
            out[i] = dot(A[i][None, :], BT, D0[i], gpu=gpu, input_format=fin, output_format=fout,
                         b_format=fb, rules=rl)
        return out
    if kernels.compiled():
        return _gemm_compiled(A, BT, D0, path, lim, fin, fout, fb)
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


def _gemm_compiled(A: npt.NDArray[Any], BT: npt.NDArray[Any], D0: npt.NDArray[Any], path: Path,
                   lim: int | None, fin: Format, fout: Format,
                   fb: Format) -> npt.NDArray[np.float32]:
    """:func:`gemm` by the compiled kernel (:mod:`ampref.kernels.tensorcore_numba`): the
    same blocks, exponents and truncations per element, the output rounding by the
    encode kernel (ampref's rules, finite inputs; B200 FP8's late addend as one correctly
    rounded float32 addition)."""
    from ampref.kernels import general_numba, tensorcore_numba

    acc = fout if fout.name == "float16" else (
        ACC_E8M13 if path.out_sig_bits == 14 else get_format("float32"))
    rnd = get_rounding("nearest_even" if fout.name == "float16" else path.out_rounding)
    late = path.late_addend and fout.name == "float32"
    late_rnd = get_rounding(path.late_rounding)
    table = value_table(acc) if acc.bits <= 16 else frozen(np.empty(0, np.float32))
    return tensorcore_numba.gemm_rows(
        frozen(A, np.float64), frozen(BT.T, np.float64), frozen(_int_exponents(A, fin.minexp)),
        frozen(_int_exponents(BT.T, fb.minexp)), frozen(D0, np.float64), block=path.block,
        frac_bits=path.frac_bits,
        lim=-16000 if lim is None else lim, e_min=min(fin.minexp + fb.minexp, -126),
        constants=general_numba.constants(64, acc.spec, rnd.code, False, True, None),
        shift=23 - acc.mantissa_bits, table=table, mantissa_bits=acc.mantissa_bits,
        nearest=rnd.name == "NEAREST_EVEN",
        late_constants=general_numba.constants(64, get_format("float32").spec, late_rnd.code,
                                               False, True, None) if late else None,
        late_nearest=late_rnd.name == "NEAREST_EVEN")


def _gemm_block(a: Any, b: Any, ea: Any, eb: Any, d: npt.NDArray[Any], path: Path,
                lim: int | None, fout: Format, e_floor: int, pbuf: Any,
                ebuf: Any) -> npt.NDArray[Any]:
    """One k-block for a tile of outputs (same algorithm as :func:`block_fma`).

    a: (k, rows, 1), b: (k, 1, N) and their int16 exponents; d: (rows, N) float64.
    """
    late = path.late_addend and fout.name == "float32"
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
