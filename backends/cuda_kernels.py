"""The kernel set of the GPU backend: the CUDA sources compiled with NVRTC through CuPy,
cuBLAS ``cublasGemmEx`` and the WMMA chain kernel (BKD-*). Importing it needs CuPy."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .kernelsrc import TILE, device_source, mma_source

__all__ = ["CUBLAS_ENUMS", "CUDA_DATA_TYPES", "CudaKernels"]

#: cudaDataType of each 16-bit operand format (CUDA's ``library_types.h``)
CUDA_DATA_TYPES: dict[str, int] = {"float16": 2, "bfloat16": 14, "float32": 0}
#: the cuBLAS enumerators ``gemm_ex`` passes (cuBLAS's ``cublas_api.h``)
CUBLAS_ENUMS: dict[str, int] = {"CUBLAS_OP_N": 0, "CUBLAS_COMPUTE_32F": 68,
                                "CUBLAS_GEMM_DEFAULT_TENSOR_OP": 99}


class CudaKernels:
    """The kernel set on a CUDA device through CuPy (compiled with NVRTC on first use)."""

    name = "cuda"
    _BLOCK = 256

    def __init__(self) -> None:
        import cupy

        self.cp = cupy
        self._mod: Any = None
        self._mma_mod: Any = None
        self._dev: dict[bytes, Any] = {}

    def device_ok(self) -> bool:
        try:
            return int(self.cp.cuda.runtime.getDeviceCount()) > 0
        except Exception:  # noqa: BLE001 - CuPy raises driver/runtime errors of several types
            return False

    def device_name(self) -> str:
        """The current CUDA device's name (as ``nvidia-smi`` shows it)."""
        props = self.cp.cuda.runtime.getDeviceProperties(self.cp.cuda.Device().id)
        name = props["name"]
        return name.decode() if isinstance(name, bytes) else str(name)

    def _module(self) -> Any:
        if self._mod is None:
            self._mod = self.cp.RawModule(code=device_source(),
                                          options=("--std=c++17", "--fmad=false"))
        return self._mod

    def _on_device(self, a: np.ndarray) -> Any:
        key = a.dtype.str.encode() + a.tobytes()
        if key not in self._dev:
            self._dev[key] = self.cp.asarray(a)
        return self._dev[key]

    def _launch(self, fname: str, n: int, args: tuple[Any, ...]) -> None:
        grid = max(1, min(-(-n // self._BLOCK), 65535))  # grid-stride loops cover the rest
        self._module().get_function(fname)((grid,), (self._BLOCK,), args)

    def quantize(self, x: Any, params: np.ndarray, rnd: int, sat: bool, subnormals: bool,
                 k1: int, k2: int, start: int = 0) -> Any:
        cp = self.cp
        wide = x.dtype == cp.float64
        src = x.view(cp.uint64 if wide else cp.uint32)
        out = cp.empty_like(src)
        self._launch("ampref_quantize_f64" if wide else "ampref_quantize_f32", src.size,
                     (src, out, np.int64(src.size), self._on_device(params), np.int32(rnd),
                      np.int32(sat), np.int32(subnormals), np.uint32(k1), np.uint32(k2),
                      np.int64(start)))
        return out.view(x.dtype)

    def encode16(self, x: Any, params: np.ndarray) -> Any:
        cp = self.cp
        out = cp.empty(x.shape, dtype=cp.uint16)
        self._launch("ampref_encode16_f32", x.size,
                     (x.view(cp.uint32), out, np.int64(x.size), self._on_device(params)))
        return out

    def random_bits(self, k1: int, k2: int, start: int, count: int) -> Any:
        out = self.cp.empty(count, dtype=self.cp.uint32)
        self._launch("ampref_random_bits_kernel", count,
                     (out, np.int64(count), np.uint32(k1), np.uint32(k2), np.int64(start)))
        return out

    def unscale_(self, g: Any, row: Any) -> None:
        self._launch("ampref_unscale_f32_kernel", g.size, (g, np.int64(g.size), row))

    def exact_gemm(self, A: Any, B: Any, T: int, sa: int, sb: int) -> Any:
        """float32 (T, M, N) = fl32(exact A @ B) of C-contiguous float64 operands holding
        float32 values, T matrices each or one with a batch stride of 0 (BKD-MM-005):
        one launch."""
        cp = self.cp
        if A.dtype != cp.float64 or B.dtype != cp.float64:
            raise ValueError(f"exact_gemm takes float64 operands holding float32 values, got "
                             f"{A.dtype} and {B.dtype}")
        M, K = A.shape[-2:]
        N = B.shape[-1]
        out = cp.empty((T, M, N), dtype=cp.float32)
        self._launch("ampref_exact_gemm_f32", T * M * N,
                     (A, B, out, np.int64(T), np.int64(M), np.int64(N), np.int64(K),
                      np.int64(sa), np.int64(sb)))
        return out

    def exact_rows(self, x: Any) -> Any:
        """float32 (R,) = fl32(exact sum) of each row of C-contiguous float64 (R, L)
        holding float32 values."""
        if x.dtype != self.cp.float64:
            raise ValueError(f"exact_rows takes float64 rows holding float32 values, got "
                             f"{x.dtype}")
        R, L = x.shape
        out = self.cp.empty(R, dtype=self.cp.float32)
        self._launch("ampref_exact_rows_f32", R, (x, out, np.int64(R), np.int64(L)))
        return out

    def exact_segments(self, x: Any, starts: Any) -> Any:
        """float32 (S, D) exact segment sums of C-contiguous float64 (n, D) holding float32
        values, int64 ``starts`` strictly increasing from 0 (BKD-RED-002): one launch."""
        cp = self.cp
        if x.dtype != cp.float64 or starts.dtype != cp.int64:
            raise ValueError(f"exact_segments takes float64 rows and int64 starts, got "
                             f"{x.dtype} and {starts.dtype}")
        n, D = x.shape
        out = cp.empty((starts.size, D), dtype=cp.float32)
        self._launch("ampref_exact_segments_f32", starts.size * D,
                     (x, starts, np.int64(starts.size), np.int64(n), np.int64(D), out))
        return out

    def adam(self, w: Any, g: Any, m: Any, v: Any, k: np.ndarray, decoupled: bool,
             decay: bool) -> tuple[Any, ...]:
        """(new w, m, v) of the Adam/AdamW update in one launch: C-contiguous arrays of one
        dtype (float32 or float64), ``k`` the nine constants in it (BKD-OPT-001)."""
        cp = self.cp
        dtypes = {a.dtype for a in (w, g, m, v, k)}
        if len(dtypes) != 1 or w.dtype not in (cp.float32, cp.float64) or k.size != 9:
            raise ValueError(f"adam takes w, g, m, v and nine constants of one dtype, float32 "
                             f"or float64; got {sorted(str(d) for d in dtypes)}, {k.size} "
                             f"constants")
        out, m_out, v_out = (cp.empty_like(w) for _ in range(3))
        fname = "ampref_adam_f32" if w.dtype == cp.float32 else "ampref_adam_f64"
        self._launch(fname, w.size, (w, g, m, v, out, m_out, v_out, np.int64(w.size),
                                     self._on_device(k), np.int32(decoupled), np.int32(decay)))
        return out, m_out, v_out

    def rounding_counts(self, raw: Any, rounded: Any) -> Any:
        """Device int64 [underflow, overflow] of float32 ``raw`` rounded to ``rounded``
        (BKD-STA-001): one launch, nothing read back."""
        cp = self.cp
        if raw.dtype != cp.float32 or rounded.dtype != cp.float32:
            raise ValueError(f"rounding_counts takes float32 arrays, got {raw.dtype} and "
                             f"{rounded.dtype}")
        out = cp.zeros(2, dtype=cp.int64)
        self._launch("ampref_rounding_counts_f32", raw.size,
                     (raw, rounded, np.int64(raw.size), out))
        return out

    def grad_counts(self, g: Any, scale: float) -> Any:
        """Device int64 [nonzero, nonzero below 2^-25 once scaled] of float32 ``g``."""
        cp = self.cp
        if g.dtype != cp.float32:
            raise ValueError(f"grad_counts takes a float32 array, got {g.dtype}")
        out = cp.zeros(2, dtype=cp.int64)
        self._launch("ampref_grad_counts_f32", g.size,
                     (g, np.int64(g.size), np.float32(scale), out))
        return out

    def erfc(self, x: Any) -> Any:
        from cupyx.scipy.special import erfc

        return erfc(x)

    def scaler_update(self, row: Any, cfg_d: np.ndarray, cfg_i: np.ndarray) -> None:
        self._module().get_function("ampref_scaler_update_kernel")(
            (1,), (1,), (row, self._on_device(cfg_d), self._on_device(cfg_i)))

    def mma_chain(self, A: Any, B: Any, fmt_name: str) -> Any:
        """C = A @ B (uint16 codes, dims multiples of 16) by the WMMA chain kernel."""
        cp = self.cp
        if self._mma_mod is None:
            inc = [f"-I{os.path.join(p, 'include')}" for p in (os.environ.get("CUDA_PATH"),
                                                              "/usr/local/cuda") if p]
            try:
                self._mma_mod = cp.RawModule(code=mma_source(),
                                             options=("--std=c++17", "--fmad=false", *inc))
                self._mma_mod.get_function("ampref_mma_chain_f16")  # compiles now
            except Exception:  # noqa: BLE001 - NVRTC without mma.h: let nvcc find the toolkit
                self._mma_mod = cp.RawModule(code=mma_source(), backend="nvcc",
                                             options=("--std=c++17", "--fmad=false"))
        M, K = A.shape
        N = B.shape[1]
        C = cp.empty((M, N), dtype=cp.float32)
        fname = "ampref_mma_chain_f16" if fmt_name == "float16" else "ampref_mma_chain_bf16"
        warps = (M // TILE) * (N // TILE)
        block = 128  # four warps, one 16x16 tile each
        self._mma_mod.get_function(fname)((-(-warps * 32 // block),), (block,),
                                          (A, B, C, np.int32(M), np.int32(N), np.int32(K)))
        return C

    def gemm_ex(self, A: Any, B: Any, fmt_name: str) -> Any:
        """float32 C = A @ B from fp16/bf16 codes via cublasGemmEx on Tensor Cores.

        cuBLAS is column-major: the row-major C = A B is computed as C^T = B^T A^T with
        no transposes, B first (leading dimension N), A second (leading dimension K)."""
        cp = self.cp
        from cupy.cuda import cublas

        A = cp.ascontiguousarray(A)
        B = cp.ascontiguousarray(B)
        M, K = A.shape
        N = B.shape[1]
        C = cp.empty((M, N), dtype=cp.float32)
        dtype = CUDA_DATA_TYPES[fmt_name]
        alpha = np.array(1.0, dtype=np.float32)
        beta = np.array(0.0, dtype=np.float32)
        handle = cp.cuda.device.get_cublas_handle()
        op_n = CUBLAS_ENUMS["CUBLAS_OP_N"]
        cublas.gemmEx(handle, op_n, op_n, N, M, K, alpha.ctypes.data, B.data.ptr, dtype, N,
                      A.data.ptr, dtype, K, beta.ctypes.data, C.data.ptr,
                      CUDA_DATA_TYPES["float32"], N, CUBLAS_ENUMS["CUBLAS_COMPUTE_32F"],
                      CUBLAS_ENUMS["CUBLAS_GEMM_DEFAULT_TENSOR_OP"])
        return C
