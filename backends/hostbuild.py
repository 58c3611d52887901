"""A host build of the device kernels: ``host_harness.cpp`` + ``ampref_kernels.cuh``
compiled with the machine's C++ compiler and called through ctypes (BKD-SRC-001), so the
CuPy backend's numerics are tested without a GPU; and an nvcc compile check.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from .kernelsrc import HEADERS, cuda_source, device_source, mma_source

__all__ = ["HostKernels", "host_compiler", "nvcc_compile"]


def _cache_dir() -> Path:
    root = os.environ.get("AMPREF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "ampref")
    return Path(root)


def host_compiler() -> str | None:
    """The C++ compiler used for the host build ($CXX, else g++, else clang++)."""
    for name in (os.environ.get("CXX"), "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def _build_host_library() -> Path:
    headers = {h: cuda_source(h) for h in HEADERS}
    harness = cuda_source("host_harness.cpp")
    digest = hashlib.sha256("\0".join([*headers.values(), harness]).encode()).hexdigest()[:16]
    target = _cache_dir() / f"ampref_host_kernels_{digest}.so"
    if target.exists():
        return target
    cxx = host_compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX, or install g++) to build the "
                           "host copy of the device kernels")
    target.parent.mkdir(parents=True, exist_ok=True)
    # build beside the target and rename: a concurrent or failed build never leaves a
    # half-written library behind
    fd, tmp = tempfile.mkstemp(suffix=".so", dir=target.parent)
    os.close(fd)
    # the sources are package data: copy them next to the build so that the compiler
    # gets real files whatever form the installed package has
    with tempfile.TemporaryDirectory(dir=target.parent) as src:
        for name, text in headers.items():
            (Path(src) / name).write_text(text, encoding="utf-8")
        (Path(src) / "host_harness.cpp").write_text(harness, encoding="utf-8")
        cmd = [cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-ffp-contract=off",
               "-I", src, str(Path(src) / "host_harness.cpp"), "-o", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        os.unlink(tmp)
        raise RuntimeError(f"building the host kernels failed ({' '.join(cmd)}):\n{proc.stderr}")
    os.replace(tmp, target)
    return target


_P = ctypes.c_void_p
_I64 = ctypes.c_longlong
_INT = ctypes.c_int
_U32 = ctypes.c_uint32


class HostKernels:
    """The device kernels' element functions compiled for the host (ctypes).

    Same call surface as the CuPy backend's kernel set, on NumPy arrays: this is how
    the CuPy backend's numerics are tested on machines without a GPU.
    """

    name = "host"

    def __init__(self) -> None:
        lib = ctypes.CDLL(str(_build_host_library()))
        sigs = {
            "ampref_host_quantize_f32": [_P, _P, _I64, _P, _INT, _INT, _INT, _U32, _U32, _I64],
            "ampref_host_quantize_f64": [_P, _P, _I64, _P, _INT, _INT, _INT, _U32, _U32, _I64],
            "ampref_host_encode16_f32": [_P, _P, _I64, _P],
            "ampref_host_random_bits": [_P, _I64, _U32, _U32, _I64],
            "ampref_host_unscale_f32": [_P, _I64, _P],
            "ampref_host_scaler_update": [_P, _P, _P],
            "ampref_host_exact_gemm_f32": [_P, _P, _P, _I64, _I64, _I64, _I64, _I64, _I64],
            "ampref_host_exact_rows_f32": [_P, _P, _I64, _I64],
            "ampref_host_exact_segments_f32": [_P, _P, _I64, _I64, _I64, _P],
            "ampref_host_adam_f32": [_P] * 7 + [_I64, _P, _INT, _INT],
            "ampref_host_adam_f64": [_P] * 7 + [_I64, _P, _INT, _INT],
            "ampref_host_rounding_counts_f32": [_P, _P, _I64, _P],
            "ampref_host_grad_counts_f32": [_P, _I64, ctypes.c_float, _P],
        }
        for fname, args in sigs.items():
            getattr(lib, fname).argtypes = args
            getattr(lib, fname).restype = None
        self._lib = lib

    @staticmethod
    def _ptr(a: np.ndarray) -> int:
        if not (a.flags.c_contiguous and a.flags.aligned):
            raise ValueError("host kernels need C-contiguous aligned arrays")
        return int(a.ctypes.data)

    def quantize(self, x: np.ndarray, params: np.ndarray, rnd: int, sat: bool, subnormals: bool,
                 k1: int, k2: int, start: int = 0) -> np.ndarray:
        """float32 or float64 ``x`` (contiguous) -> quantized values, same dtype."""
        wide = x.dtype == np.float64
        src = np.ascontiguousarray(x).view(np.uint64 if wide else np.uint32)
        out = np.empty_like(src)
        fn = self._lib.ampref_host_quantize_f64 if wide else self._lib.ampref_host_quantize_f32
        fn(self._ptr(src), self._ptr(out), src.size, self._ptr(params), rnd, int(sat),
           int(subnormals), k1, k2, start)
        return out.view(x.dtype)

    def encode16(self, x: np.ndarray, params: np.ndarray) -> np.ndarray:
        src = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
        out = np.empty(src.shape, dtype=np.uint16)
        self._lib.ampref_host_encode16_f32(self._ptr(src), self._ptr(out), src.size,
                                           self._ptr(params))
        return out

    def random_bits(self, k1: int, k2: int, start: int, count: int) -> np.ndarray:
        out = np.empty(count, dtype=np.uint32)
        self._lib.ampref_host_random_bits(self._ptr(out), count, k1, k2, start)
        return out

    def unscale_(self, g: np.ndarray, row: np.ndarray) -> None:
        """Unscale float32 ``g`` in place; raise ``row``'s found flag on a non-finite."""
        self._lib.ampref_host_unscale_f32(self._ptr(g), g.size, self._ptr(row))

    def exact_gemm(self, A: np.ndarray, B: np.ndarray, T: int, sa: int,
                   sb: int) -> np.ndarray:
        """float32 (T, M, N) = fl32(exact A @ B) of C-contiguous float64 operands holding
        float32 values, T matrices each (or one, with a batch stride of 0) (BKD-MM-005)."""
        _check_wide(A, B)
        M, K = A.shape[-2:]
        N = B.shape[-1]
        out = np.empty((T, M, N), np.float32)
        self._lib.ampref_host_exact_gemm_f32(self._ptr(A), self._ptr(B), self._ptr(out),
                                             T, M, N, K, sa, sb)
        return out

    def exact_rows(self, x: np.ndarray) -> np.ndarray:
        """float32 (R,) = fl32(exact sum) of each row of C-contiguous float64 (R, L)
        holding float32 values."""
        _check_wide(x)
        R, L = x.shape
        out = np.empty(R, np.float32)
        self._lib.ampref_host_exact_rows_f32(self._ptr(x), self._ptr(out), R, L)
        return out

    def exact_segments(self, x: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """float32 (S, D) exact segment sums of C-contiguous float64 (n, D) holding
        float32 values; ``starts`` int64, strictly increasing from 0 (BKD-RED-002)."""
        _check_wide(x)
        if starts.dtype != np.int64:
            raise ValueError(f"exact_segments takes int64 starts, got {starts.dtype}")
        n, D = x.shape
        out = np.empty((starts.size, D), np.float32)
        self._lib.ampref_host_exact_segments_f32(self._ptr(x), self._ptr(starts), starts.size,
                                                 n, D, self._ptr(out))
        return out

    def adam(self, w: np.ndarray, g: np.ndarray, m: np.ndarray, v: np.ndarray,
             k: np.ndarray, decoupled: bool, decay: bool) -> tuple[np.ndarray, ...]:
        """(new w, m, v) of the Adam/AdamW update, all arrays C-contiguous in one dtype
        (float32 or float64), ``k`` the nine constants in that dtype (BKD-OPT-001)."""
        dtypes = {a.dtype for a in (w, g, m, v, k)}
        if len(dtypes) != 1 or w.dtype not in (np.float32, np.float64) or k.size != 9:
            raise ValueError(f"adam takes w, g, m, v and nine constants of one dtype, float32 "
                             f"or float64; got {sorted(str(d) for d in dtypes)}, {k.size} "
                             f"constants")
        out, m_out, v_out = (np.empty_like(w) for _ in range(3))
        fn = self._lib.ampref_host_adam_f32 if w.dtype == np.float32 else \
            self._lib.ampref_host_adam_f64
        fn(*(self._ptr(a) for a in (w, g, m, v, out, m_out, v_out)), w.size, self._ptr(k),
           int(decoupled), int(decay))
        return out, m_out, v_out

    def rounding_counts(self, raw: np.ndarray, rounded: np.ndarray) -> np.ndarray:
        """int64 [underflow, overflow] of C-contiguous float32 ``raw`` rounded to
        ``rounded`` (BKD-STA-001)."""
        _check_f32(raw, rounded)
        out = np.zeros(2, np.int64)
        self._lib.ampref_host_rounding_counts_f32(self._ptr(raw), self._ptr(rounded), raw.size,
                                                  self._ptr(out))
        return out

    def grad_counts(self, g: np.ndarray, scale: float) -> np.ndarray:
        """int64 [nonzero, nonzero below 2^-25 once multiplied by fl32(scale)] of
        C-contiguous float32 ``g`` (BKD-STA-001)."""
        _check_f32(g)
        out = np.zeros(2, np.int64)
        self._lib.ampref_host_grad_counts_f32(self._ptr(g), g.size, float(np.float32(scale)),
                                              self._ptr(out))
        return out

    def erfc(self, x: np.ndarray) -> np.ndarray:
        from scipy.special import erfc

        return np.asarray(erfc(x))

    def scaler_update(self, row: np.ndarray, cfg_d: np.ndarray, cfg_i: np.ndarray) -> None:
        self._lib.ampref_host_scaler_update(self._ptr(row), self._ptr(cfg_d), self._ptr(cfg_i))


def _check_wide(*arrays: np.ndarray) -> None:
    """The exact kernels read float64 (the widened float32 values): anything else would
    be read as the wrong bits."""
    for a in arrays:
        if a.dtype != np.float64:
            raise ValueError(f"the exact kernels take float64 arrays holding float32 values, "
                             f"got {a.dtype}")


def _check_f32(*arrays: np.ndarray) -> None:
    for a in arrays:
        if a.dtype != np.float32:
            raise ValueError(f"the statistics kernels take float32 arrays, got {a.dtype}")


def nvcc_compile(source_name: str, arch: str = "sm_90") -> subprocess.CompletedProcess[str]:
    """Compile a device source to PTX with nvcc (a check that needs no GPU).

    Raises:
        RuntimeError: nvcc is not on PATH.
        ValueError: unknown source name (choices listed).
    """
    choices = {"kernels": device_source, "mma_chain": mma_source}
    if source_name not in choices:
        raise ValueError(f"unknown device source {source_name!r}; choose one of "
                         f"{', '.join(choices)}")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / f"{source_name}.cu"
        src.write_text(choices[source_name]())
        return subprocess.run([nvcc, f"-arch={arch}", "--fmad=false", "-std=c++17", "-ptx",
                               str(src), "-o", str(Path(d) / "out.ptx")],
                              capture_output=True, text=True, check=False)
