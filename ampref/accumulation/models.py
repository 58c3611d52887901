"""Matmul accumulation models: how the products of a dot product are summed.

Models by name (``specs/accumulation.md`` ACC-*):

* ``sequential``: d = c; for k = 0..K-1: d = fl(d + fl(a_k b_k)), every operation
  rounded to nearest-even in the output format (fp32 by default), left to right.
* ``fma-chain``: d = c; for k: d = fl(a_k b_k + d), one rounding per step (FMA).
* ``pairwise``: the products fl(a_k b_k) are summed by recursive halving (the left half
  has ceil(n/2) terms), each addition rounded; then d = fl(sum + c).
* ``exact``: the exact a.b + c rounded once.
* ``tensorcore:<gpu>``: the block-FMA model of :mod:`ampref.accumulation.tensorcore` for NVIDIA
  GPUs (``rules=`` switches its undecided conventions, ACC-TC-008), the MFMA model of
  :mod:`ampref.accumulation.mfma` for AMD ones (mi100, mi250, mi300, mi325).

All models take inputs representable in ``input_format`` and return float32 arrays
(fp16 outputs widened exactly).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from . import mfma, tensorcore
from .library import library_dot, library_gemm
from .registry import DEFAULT, Resolved, model_names, resolve
from ampref.common.checks import check_count, real_array
from ampref.formats.cast import quantize
from ampref.formats.exactsum import add_rounded, fma_chain, round_odd_exact
from ampref.formats.table import Format, get_format

__all__ = ["DEFAULT", "MODELS", "dot", "matmul", "parse_model", "error_bound"]

#: the accumulation models by name (templates take a GPU), from the registry's rows
MODELS = tuple(model_names())


def _check_rules(kind: str, rules: object, accumulation: str) -> None:
    if rules is not None and kind != "tensorcore":
        raise ValueError(f"rules={rules!r} switches NVIDIA tensor-core conventions; "
                         f"{accumulation!r} takes none (leave rules=None)")


def parse_model(accumulation: str) -> tuple[str, str | None]:
    """Split a model name into (kind, gpu): the registry's parse (:func:`resolve`).

    Raises:
        TypeError: not a str.
        ValueError: unknown model or GPU (choices listed).
    """
    r = resolve(accumulation)
    return r.kernel, r.gpu


def _host_only(r: Resolved) -> None:
    if r.kernel == "cublas":
        raise ValueError("accumulation='cublas' is the real cuBLAS call: it runs on a GPU "
                         "backend (ampref.backends.get('cupy')); on the host use its "
                         "model 'cublas:h100' (or 'cublas:h200')")


def _fl(x: Any, fmt: Format) -> Any:
    return quantize(np.asarray(x, dtype=np.float64), fmt)


def _products(a: Any, b: Any, fmt: Format) -> Any:
    """fl(a*b): exact in float64 for inputs of <= 26 significant bits, then one rounding."""
    return _fl(a * b, fmt)


def _sequential(a: Any, b: Any, c: Any, fmt: Format) -> Any:
    p = _products(a, b, fmt)
    d = c
    for k in range(p.shape[-1]):
        d = add_rounded(d, p[..., k], fmt, "nearest_even")
    return d


def _pairwise_sum(p: Any, fmt: Format) -> Any:
    n = p.shape[-1]
    if n == 0:
        return np.zeros(p.shape[:-1])
    if n == 1:
        return p[..., 0]
    h = (n + 1) // 2
    return add_rounded(_pairwise_sum(p[..., :h], fmt), _pairwise_sum(p[..., h:], fmt), fmt,
                       "nearest_even")


def _exact(a: Any, b: Any, c: Any, fmt: Format) -> Any:
    """Exact sum of products and c (integers on a common scale), rounded once."""
    terms = np.concatenate([a * b, c[..., None]], axis=-1).reshape(-1, a.shape[-1] + 1)
    out = np.empty(terms.shape[0])
    for i, row in enumerate(terms):
        out[i] = round_odd_exact(row)
    return quantize(out, fmt).reshape(c.shape)


def dot(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None = None, *,
        accumulation: str = DEFAULT, input_format: str | Format = "float32",
        output_format: str | Format = "float32", quantize_inputs: bool = False,
        b_format: str | Format | None = None, rules: str | tensorcore.Rules | None = None
        ) -> Any:
    """Batched dot products over the last axis under an accumulation model (float32 out,
    float64 for float64 tensor-core inputs); ``b_format`` is b's format when it differs
    from ``input_format`` (mixed FP8/FP6/FP4); ``rules`` the tensor-core conventions."""
    r = resolve(accumulation)
    kind, gpu = r.kernel, r.gpu
    _check_rules(kind, rules, accumulation)
    _host_only(r)
    fin, fout = get_format(input_format), get_format(output_format)
    fb = get_format(b_format or fin)
    if kind == "tensorcore":
        assert gpu is not None  # parse_model returns a GPU for tensorcore models
        return tensorcore.dot(a, b, c, gpu=gpu, input_format=fin, output_format=fout,
                              quantize_inputs=quantize_inputs, b_format=fb, rules=rules)
    rnd = "toward_zero" if fin.name == "tf32" else "nearest_even"
    a64 = tensorcore.check_inputs(a, fin, "a", quantize_inputs, rnd)
    b64 = tensorcore.check_inputs(b, fb, "b", quantize_inputs, rnd)
    a64, b64 = np.broadcast_arrays(a64, b64)
    lead = a64.shape[:-1]
    c64 = np.zeros(lead) if c is None else np.broadcast_to(
        real_array("c", c).astype(np.float64), lead)
    if kind == "mfma":
        assert gpu is not None  # parse_model returns a GPU for mfma models
        return mfma.mfma_dot(a64, b64, c64, gpu=gpu, a_format=fin, b_format=fb,
                             output_format=fout)
    if kind == "library":
        assert gpu is not None  # the registry returns a GPU for library models
        return library_dot(a64, b64, c64, gpu=gpu, fast_accum=r.fast_accum,
                           input_format=fin, output_format=fout, b_format=fb,
                           split_k=r.split_k, tf32=r.tf32)
    c64 = _fl(c64, fout)
    if kind == "sequential":
        d = _sequential(a64, b64, c64, fout)
    elif kind == "fma-chain":
        d = fma_chain(a64, b64, c64, fout)
    elif kind == "pairwise":
        d = add_rounded(_pairwise_sum(_products(a64, b64, fout), fout), c64, fout, "nearest_even")
    else:
        d = _exact(a64, b64, c64, fout)
    return np.asarray(d).astype(np.float32)


def matmul(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None = None, *,
           input_format: str | Format, output_format: str | Format = "float32",
           accumulation: str = DEFAULT, quantize_inputs: bool = False,
           threads: int = 2, b_format: str | Format | None = None,
           rules: str | tensorcore.Rules | None = None) -> npt.NDArray[Any]:
    """GEMM D = A @ B + C, each entry a dot product under ``accumulation``.

    K order (ACC-GEMM-001): every output element D[i, j] is
    ``dot(A[i, :], B[:, j], C[i, j])`` with k ascending, so a model's chained blocks
    run over k = 0..b-1, b..2b-1, ... . Rows are computed in independent tiles (on
    ``threads`` threads); tiling never changes any result.

    Raises:
        ValueError: shapes do not chain (both shown), unknown model or formats, or an
            input not representable in ``input_format``.
    """
    A, B = np.asarray(a), np.asarray(b)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ValueError(f"matmul needs (M, K) @ (K, N), got {A.shape} @ {B.shape}")
    threads = check_count("threads", threads)
    r = resolve(accumulation)
    kind, gpu = r.kernel, r.gpu
    _check_rules(kind, rules, accumulation)
    _host_only(r)
    fin, fout = get_format(input_format), get_format(output_format)
    fb = get_format(b_format or fin)
    rnd = "toward_zero" if fin.name == "tf32" else "nearest_even"
    A = tensorcore.check_inputs(A, fin, "a", quantize_inputs, rnd)
    B = tensorcore.check_inputs(B, fb, "b", quantize_inputs, rnd)
    M, N = A.shape[0], B.shape[1]
    C = np.zeros((M, N)) if c is None else np.broadcast_to(
        real_array("c", c).astype(np.float64), (M, N))
    BT = np.ascontiguousarray(B.T)
    if kind == "tensorcore":
        assert gpu is not None  # parse_model returns a GPU for tensorcore models
        return tensorcore.gemm(A, BT, C, gpu=gpu, input_format=fin, output_format=fout,
                               threads=threads, b_format=fb, rules=rules)
    if kind == "library":
        assert gpu is not None  # the registry returns a GPU for library models
        return library_gemm(A, B, np.asarray(C, np.float32), gpu=gpu,
                            fast_accum=r.fast_accum, input_format=fin, output_format=fout,
                            b_format=fb, threads=threads, split_k=r.split_k, tf32=r.tf32)
    rows = max(1, 2**20 // max(1, N * A.shape[1]))
    out = np.empty((M, N), dtype=np.float64 if fout.name == "float64" else np.float32)
    for i in range(0, M, rows):
        out[i:i + rows] = dot(A[i:i + rows, None, :], BT[None, :, :], C[i:i + rows],
                              accumulation=accumulation, input_format=fin, output_format=fout,
                              b_format=fb)
    return out


def unit_roundoff(fmt: str | Format, rounding: str = "nearest_even") -> float:
    """u = 2^-p for round-to-nearest, 2^(1-p) for directed rounding (p with implicit bit)."""
    f = get_format(fmt)
    return 2.0 ** (-f.precision_bits + (0 if rounding.startswith("nearest") else 1))


def gamma(n: int, u: float) -> float:
    """gamma_n = n u / (1 - n u) (Higham, Accuracy and Stability, 2nd ed., Lemma 3.1)."""
    if n * u >= 1:
        return math.inf
    return n * u / (1 - n * u)


def error_bound(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike | None = None, *,
                accumulation: str = DEFAULT, input_format: str | Format = "float32",
                output_format: str | Format = "float32") -> npt.NDArray[np.float64]:
    """Rigorous per-element bound on |computed - exact a.b + c| (last axis).

    Classic models (ACC-BND-001; Higham, 2nd ed., sec. 3.1): with u the unit roundoff
    of the output format and eta = its smallest subnormal / 2 (underflow),

    * sequential: gamma_{K+1}(u) (|a|.|b| + |c|) + (2K+1) eta  (any order, so also the
      bound to check cuBLAS against);
    * fma-chain: gamma_K(u) (...) + K eta;
    * pairwise: gamma_{ceil(log2(K+1))+1}(u) (...) + (2K+1) eta;
    * exact: u |a.b + c| + eta.

    Tensor-core model (ACC-BND-002): per block the truncation of each of the b products
    and of c loses less than q = 2^(E-f) <= 2^-f max(2^L, tilde a_i tilde b_i, tilde c)
    with tilde x = max(|x|, 2^emin_in) (subnormal inputs carry emin's exponent), and the
    output rounding loses rho |result| (rho = 2^(1-p_out) directed, 2^-p_out nearest). So
    each block scales the running magnitude bound T = sum tilde a tilde b + tilde c +
    n_blocks 2^L by at most (1 + h), h = (b+1) 2^-f (1+rho) + rho (+ 2^-24 for a late
    addend), and the total error is at most T ((1 + h)^n_blocks - 1) + n_blocks eta.
    """
    A = tensorcore.check_inputs(a, get_format("float64"), "a", False, "nearest_even")
    B = tensorcore.check_inputs(b, get_format("float64"), "b", False, "nearest_even")
    K = A.shape[-1]
    kind, gpu = parse_model(accumulation)
    fin, fout = get_format(input_format), get_format(output_format)
    C = np.zeros(A.shape[:-1]) if c is None else real_array("c", c).astype(np.float64)
    eta = fout.smallest_subnormal / 2
    with np.errstate(over="ignore", invalid="ignore"):
        mag = (np.abs(A) * np.abs(B)).sum(axis=-1) + np.abs(C)
        if kind == "mfma":
            raise ValueError(f"error_bound: no rigorous bound is stated for the AMD MFMA "
                             f"model {accumulation!r} (ACC-MFMA-004); check it bitwise")
        if kind == "library" and resolve(accumulation).tf32 and fin.name == "float32":
            # the TF32 kernels read float32 operands cut to 10 fraction bits: each
            # product loses less than (2^-9 + 2^-20) of itself before ACC-BND-003's TF32
            # bound applies to the cut operands (whose magnitudes are no larger)
            cut = (2.0**-9 + 2.0**-20) * (np.abs(A) * np.abs(B)).sum(axis=-1)
            return cut + _library_bound(A, B, C, mag, gpu, get_format("tf32"), fout, eta)
        if kind in ("library", "cublas"):
            return _library_bound(A, B, C, mag, gpu, fin, fout, eta)
        if kind == "tensorcore":
            assert gpu is not None  # parse_model returns a GPU for tensorcore models
            path, lim, fin, fout = tensorcore.block_params(gpu, fin, fout)
            if not path.fma_chain:
                return _block_fma_bound(A, B, C, path, lim, fin, fout)
            kind, eta = "fma-chain", fout.smallest_subnormal / 2  # DMMA: FMAs in fp64
        u = unit_roundoff(fout)
        if kind == "exact":
            return u * mag + eta
        if kind == "pairwise":
            return gamma(math.ceil(math.log2(K + 1)) + 1, u) * mag + (2 * K + 1) * eta
        if kind == "fma-chain":
            return gamma(K, u) * mag + K * eta
        return gamma(K + 1, u) * mag + (2 * K + 1) * eta


def _block_fma_bound(A: Any, B: Any, C: Any, path: tensorcore.Path, lim: int | None,
                     fin: Format, fout: Format) -> npt.NDArray[np.float64]:
    """ACC-BND-002 (see :func:`error_bound`)."""
    K, eta = A.shape[-1], fout.smallest_subnormal / 2
    t = 2.0 ** fin.minexp
    tilde = lambda x: np.where(x == 0, 0.0, np.maximum(np.abs(x), t))  # noqa: E731
    n_blocks = max(1, math.ceil(K / path.block))
    floor = n_blocks * (2.0**lim if lim is not None else 0.0)
    with np.errstate(over="ignore", invalid="ignore"):
        T = (tilde(A) * tilde(B)).sum(axis=-1) + np.where(C == 0, 0.0,
                                                          np.maximum(np.abs(C), 2.0**-126)) + floor
    sig = path.out_sig_bits if fout.name == "float32" else fout.precision_bits
    rho = 2.0 ** (1 - sig) if (fout.name == "float32" and path.out_rounding == "toward_zero") \
        else 2.0 ** -sig
    h = (path.block + 1) * 2.0**-path.frac_bits * (1 + rho) + rho
    if path.late_addend and fout.name == "float32":
        h += 2.0**-24
    return np.asarray(T * math.expm1(n_blocks * math.log1p(h)) + n_blocks * eta)


def _library_bound(A: Any, B: Any, C: Any, mag: Any, gpu: str | None, fin: Format,
                   fout: Format, eta: float) -> npt.NDArray[np.float64]:
    """ACC-BND-003, the library GEMMs: the instruction chain's block bound (ACC-BND-002),
    the float32 additions of FP8 promotion (at most K/128 + 1, each within 2^-24 of the
    running magnitude), and one rounding into a 16-bit output. TF32 and SGEMM, whose
    order is not modelled: any order of K additions each within 2^-21 (TF32: a block of
    at most 8 products truncated at 25 bits loses less than 9 * 2^-25 of its terms) or
    2^-24 (SGEMM, round to nearest) of the running magnitude. ``cublas`` (the real call,
    fp16/bf16 in, fp32 out) takes the same bound as ``cublas:h100``."""
    K = A.shape[-1]
    if fin.name in ("tf32", "float32"):
        u = 2.0**-21 if fin.name == "tf32" else 2.0**-24
        return np.asarray(gamma(K + 1, u) * mag + (2 * K + 1) * eta)
    inst = "h100" if gpu is None else gpu
    path, lim, fin32, f32 = tensorcore.block_params(inst, fin, get_format("float32"))
    chain = _block_fma_bound(A, B, C, path, lim, fin32, f32)
    adds = K // 128 + 1 if fin.name.startswith("float8") else 0
    total = chain + gamma(adds, 2.0**-24) * (mag + chain) if adds else chain
    if fout.name != "float32":
        u_out = unit_roundoff(fout)
        total = total + u_out * (mag + total) + fout.smallest_subnormal / 2
    return np.asarray(total)
