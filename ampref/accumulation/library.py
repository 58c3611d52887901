"""Library-kernel models: the GEMMs cuBLAS and cuBLASLt run on a GPU, as torch calls them
(``accumulation="cublas:<gpu>[:fast-accum][:tf32][:split-k=<S>]"``; ``specs/accumulation.md``
ACC-LIB-*).

A library GEMM is the GPU's matrix instruction chained over K plus what the kernel does
around it. Derived from outputs recorded on an H100 (torch 2.11, cuBLAS 13;
``tests/data/h100_gemms.npz``), each rule reproduces every recorded element:

* fp16/bf16 inputs (``torch.mm``): one chain of the instruction model in float32 over
  all of K, then one round-to-nearest-even into the output format (float32, float16 or
  bfloat16): cuBLAS computes in float32 whatever the output.
* FP8 inputs (``torch._scaled_mm``) with fast accumulation: the chain, as above.
* FP8 without fast accumulation (torch's default): the chain restarts from zero every
  128 products (the promotion interval) and each partial result is added to a float32
  accumulator with one round-to-nearest-even addition, in K order, then rounded to the
  output format. The recorded data also fit the exact sum of the partial results
  rounded once; the sequential float32 additions are the mechanism (CUTLASS's
  promotion, DeepSeek-V3 sec. 3.3.2) and are what is stated.
* TF32 (``allow_tf32``): the instruction model's TF32 chain (blocks of 8 products), as
  above; cuBLAS ran every recorded TF32 GEMM split-K (below), from K = 16 on.
* float32 SIMT SGEMM (TF32 off): a chain of correctly rounded float32 FMAs in K order
  (no tensor core), likewise split-K in every recorded case. With ``tf32`` (torch's
  ``allow_tf32``) float32 operands run on the TF32 kernels instead, their low 13
  fraction bits ignored ("only the first 10 bits of the input mantissa are read",
  torch's numerical-accuracy notes; the recordings hold TF32-exact operands only).
* split-K (``split-k=S``, the kernel cuBLAS picks for small M x N with long K): K is cut
  into S slices of ``ceil(ceil(K / g) / S)`` granules of g products (the last slice
  shorter; g = 128 for fp16/bf16/FP8, 4 for TF32, 8 for SGEMM), each slice is the rule
  above from zero, and the slice results are added to a float32 accumulator starting
  at C, one RNE addition per slice, in K order, then rounded once to the output. S
  itself is cuBLAS's heuristic choice (not modelled).
* Not modelled, only bounded (ACC-BND-003): fp16/bf16 GEMMs with K not a multiple of 8
  (rows not 16-byte aligned): cuBLAS runs another kernel there, and the one recorded
  (8x12345x8) fits no slice count of 128-product granules (ACC-LIB-006 records what it
  does fit); the model computes them as the aligned kernel would.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import quantize
from ampref.formats.exactsum import fma_chain
from ampref.formats.table import Format, get_format
from . import tensorcore
from .registry import LIBRARY_GPUS, MAX_SPLIT_K, LibraryGPU

__all__ = ["library_dot", "library_gemm", "split_bounds"]

_FP8 = ("float8_e4m3fn", "float8_e5m2")
_16BIT = ("float16", "bfloat16")
_FLOAT32 = ("tf32", "float32")


def _check(gpu: str, fin: Format, fout: Format, fb: Format) -> LibraryGPU:
    """The GPU's library row, or a named refusal of the formats."""
    if fin.name not in _16BIT + _FP8 + _FLOAT32 or (fb.name != fin.name and fin.name not in _FP8):
        raise ValueError(f"cublas:{gpu} models float16, bfloat16, FP8 (float8_e4m3fn, "
                         f"float8_e5m2), tf32 and float32 inputs, got {fin.name} x {fb.name}")
    outs = ("float32",) if fin.name in _FLOAT32 else ("float32", "float16", "bfloat16")
    if fout.name not in outs:
        raise ValueError(f"cublas:{gpu} writes {' or '.join(outs)} for {fin.name} inputs, "
                         f"got {fout.name}")
    return LIBRARY_GPUS[gpu]


def _finish(acc: Any, fout: Format) -> npt.NDArray[Any]:
    """One round-to-nearest-even from the float32 accumulator into the output format."""
    acc32 = np.asarray(acc, np.float32)
    if fout.name == "float32":
        return acc32
    return np.asarray(quantize(acc32, fout), np.float32)


def _summed(part: Any, bounds: list[tuple[int, int]], c32: Any) -> Any:
    """Sum of ``part(k0, k1)`` over ``bounds`` into a float32 accumulator starting at
    ``c32``, one RNE addition each, in K order (float64 holds the exact sum of two
    float32 values, so one rounding follows; an overflowing sum becomes inf)."""
    acc = np.asarray(c32, np.float32)
    for k0, k1 in bounds:
        with np.errstate(over="ignore", invalid="ignore"):
            acc = (acc.astype(np.float64)
                   + np.asarray(part(k0, k1), np.float64)).astype(np.float32)
    return acc


def _intervals(k0: int, k1: int, step: int) -> list[tuple[int, int]]:
    """[k0, k1) cut every ``step`` products."""
    return [(k, min(k1, k + step)) for k in range(k0, k1, step)]


def _check_split(split_k: object) -> int:
    """``split_k`` as an int in 1..MAX_SPLIT_K, or a named ValueError."""
    if isinstance(split_k, bool) or not isinstance(split_k, int) \
            or not 1 <= split_k <= MAX_SPLIT_K:
        raise ValueError(f"split_k takes a slice count 1..{MAX_SPLIT_K}, got {split_k!r}")
    return split_k


def split_bounds(K: int, split_k: int, granule: int) -> list[tuple[int, int]]:
    """The K slices of a split-K kernel: ``ceil(ceil(K / granule) / split_k)`` granules
    each, the last slice shorter, empty slices dropped (ACC-LIB-006).

    Raises:
        ValueError: ``split_k`` outside 1..MAX_SPLIT_K, a negative K or a granule < 1.
    """
    split_k = _check_split(split_k)
    if isinstance(K, bool) or not isinstance(K, int) or K < 0 \
            or isinstance(granule, bool) or not isinstance(granule, int) or granule < 1:
        raise ValueError(f"split_bounds needs an int K >= 0 and granule >= 1, got K={K!r}, "
                         f"granule={granule!r}")
    granules = -(-K // granule)
    per = -(-granules // split_k) * granule
    return _intervals(0, K, max(per, 1))


def _accumulate(chain: Any, K: int, c: Any, *, fp8_promoted: bool, interval: int,
                split_k: int, granule: int) -> Any:
    """The library kernel's float32 result: one chain from C, FP8 promotion, split-K."""
    def slice_sum(k0: int, k1: int) -> Any:  # one slice from zero: chained or promoted
        if fp8_promoted and k1 - k0 > interval:
            return _summed(chain, _intervals(k0, k1, interval), np.zeros(np.shape(c)))
        return chain(k0, k1)

    slices = split_bounds(K, split_k, granule) if split_k > 1 else [(0, K)]
    if len(slices) > 1:
        return _summed(slice_sum, slices, c)
    if fp8_promoted and K > interval:
        return _summed(chain, _intervals(0, K, interval), c)
    return chain(0, K, c)


def _as_tf32(x: Any, fin: Format, tf32: bool) -> tuple[Any, Format]:
    """float32 operands as the TF32 kernels read them (``tf32``), else unchanged."""
    if tf32 and fin.name == "float32":
        return tensorcore.tf32_words(x), get_format("tf32")
    return x, fin


def library_gemm(A: npt.NDArray[Any], B: npt.NDArray[Any], C: npt.NDArray[Any], *,
                 gpu: str, fast_accum: bool, input_format: str | Format,
                 output_format: str | Format = "float32", b_format: str | Format | None = None,
                 threads: int = 2, split_k: int = 1, tf32: bool = False) -> npt.NDArray[Any]:
    """D = A @ B + C as the library GEMM of ``gpu`` (inputs validated, (M, K) @ (K, N);
    C float32 (M, N)). float32 results (16-bit outputs widened exactly).

    NaN and inf propagate as the instruction model gives them; an overflowing float32
    partial sum becomes inf in the RNE addition; rounding into a 16-bit output saturates
    nothing (inf beyond the format's range), as cuBLAS's conversion does.

    Raises:
        ValueError: formats the library does not take (choices named).
    """
    split_k = _check_split(split_k)
    fin, fout = get_format(input_format), get_format(output_format)
    fb = get_format(b_format or fin)
    A, _ = _as_tf32(A, fin, tf32)
    B, fin = _as_tf32(B, fin, tf32)
    fb = fin if fb.name == "float32" else fb
    row = _check(gpu, fin, fout, fb)
    BT = np.ascontiguousarray(np.asarray(B).T)
    zero = np.zeros(C.shape)

    def chain(k0: int, k1: int, c: Any = zero) -> Any:
        a, bt = np.ascontiguousarray(A[:, k0:k1]), np.ascontiguousarray(BT[:, k0:k1])
        if fin.name == "float32":  # SIMT: one FMA per product, K ascending
            return fma_chain(a[:, None, :], bt[None, :, :], np.asarray(c, np.float64),
                             fin).astype(np.float32)
        return tensorcore.gemm(a, bt, c, gpu=row.instruction, input_format=fin,
                               output_format="float32", threads=threads, b_format=fb)

    return _finish(_accumulate(chain, A.shape[1], C, fp8_promoted=fin.name in _FP8
                               and not fast_accum, interval=row.fp8_promotion,
                               split_k=split_k, granule=row.granule(fin.name)), fout)


def library_dot(a: Any, b: Any, c: Any, *, gpu: str, fast_accum: bool, input_format: Format,
                output_format: Format, b_format: Format, split_k: int = 1,
                tf32: bool = False) -> npt.NDArray[Any]:
    """Batched dot products over the last axis under the library model (see
    :func:`library_gemm`; ``a``, ``b`` validated and broadcast, ``c`` of shape (...))."""
    split_k = _check_split(split_k)
    a, _ = _as_tf32(a, input_format, tf32)
    b, input_format = _as_tf32(b, input_format, tf32)
    b_format = input_format if b_format.name == "float32" else b_format
    row = _check(gpu, input_format, output_format, b_format)

    def chain(k0: int, k1: int, c_: Any = None) -> Any:
        c0 = np.zeros(a.shape[:-1]) if c_ is None else c_
        if input_format.name == "float32":
            return fma_chain(a[..., k0:k1], b[..., k0:k1], np.asarray(c0, np.float64),
                             input_format).astype(np.float32)
        return tensorcore.dot(a[..., k0:k1], b[..., k0:k1], c0, gpu=row.instruction,
                              input_format=input_format, output_format="float32",
                              b_format=b_format)

    return _finish(_accumulate(chain, a.shape[-1], c, fp8_promoted=input_format.name in _FP8
                               and not fast_accum, interval=row.fp8_promotion,
                               split_k=split_k, granule=row.granule(input_format.name)),
                   output_format)
