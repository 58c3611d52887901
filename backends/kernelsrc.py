"""The CUDA sources of the CuPy backend, their parameters, and a host build of them.

``backends/cuda/ampref_kernels.cuh`` holds the element functions (quantize, stochastic
bits, loss-scale update, unscale) written for both NVRTC and a host C++ compiler. The
CuPy backend compiles ``kernels.cu`` + that header on the device; :class:`HostKernels`
compiles ``host_harness.cpp`` + the same header with the machine's C++ compiler and runs
it through ctypes, so the recipes the GPU executes are tested bit for bit against the
NumPy reference on any machine (specs/backends.md BKD-SRC-001).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
from importlib import resources
from pathlib import Path

import numpy as np

from ampref.formats import Encoding, Format, get_format
from ampref.rounding import RoundingMode, get_rounding
from ampref.scaling import ScalerConfig, ScalerState
from ampref.srhash import keys, check_seed

__all__ = [
    "ACTIONS",
    "cuda_source",
    "HostKernels",
    "device_source",
    "format_params",
    "mma_source",
    "rounding_index",
    "scaler_arrays",
    "state_from_row",
    "state_row",
]

HEADER = "ampref_kernels.cuh"


def cuda_source(name: str) -> str:
    """The text of one file of ``ampref/backends/cuda`` (package data, read with
    importlib.resources so that it works from wheels as well as from a checkout).

    Raises:
        ValueError: no such CUDA source (the shipped ones listed).
    """
    folder = resources.files("ampref.backends").joinpath("cuda")
    entry = folder.joinpath(name)
    if not entry.is_file():
        shipped = sorted(e.name for e in folder.iterdir() if e.is_file())
        raise ValueError(f"unknown CUDA source {name!r}; shipped: {', '.join(shipped)}")
    return entry.read_text(encoding="utf-8")

#: action codes of the device update, in the order of the AMPREF_ACT_* constants
ACTIONS = ("grow", "backoff", "hold", "skip", "clamp", "raise")
_RULES = ("equal", "at_least", "modulo", "since_overflow")
_ARITH = ("f64_to_f32", "f32", "f64")
_REFILL = ("any_clean", "growth")
_FLOOR = ("none", "clamp", "raise")
#: slots of the scaler's device row (AMPREF_ST_*)
ST_SCALE, ST_GROWTH, ST_HYST, ST_STEP, ST_LAST_OVERFLOW, ST_FOUND, ST_ACTION = range(7)
ST_COUNT = 8


def device_source() -> str:
    """One NVRTC source: the shared header followed by the kernel entry points."""
    return cuda_source(HEADER) + "\n" + cuda_source("kernels.cu")


def mma_source() -> str:
    """The tensor-core chain kernel (needs the CUDA headers mma.h, cuda_fp16/bf16.h)."""
    return cuda_source("mma_chain.cu")


def format_params(fmt: str | Format) -> np.ndarray:
    """The int32 parameter row (AMPREF_P_*) that describes ``fmt`` to the kernels.

    Raises:
        ValueError: a storage-only format (float64), which has no codes.
    """
    f = get_format(fmt)
    if not f.kernel:
        raise ValueError(f"{f.name} is storage-only and has no rounding kernel; device "
                         f"kernels quantize to one of the 12 code formats")
    enc = list(Encoding).index(f.encoding)
    row = [f.mantissa_bits, f.exponent_bits, f.bias, enc, f.minexp, f.maxexp_value,
           f.min_exponent_field, f.max_code,
           -1 if f.inf_code is None else f.inf_code, -1 if f.nan_code is None else f.nan_code,
           int(f.has_subnormals), f.bits, int(f.is_signed)]
    return np.array(row, dtype=np.int32)


def rounding_index(rounding: str | RoundingMode) -> int:
    """The kernels' number for a rounding mode (RoundingMode's order)."""
    return list(RoundingMode).index(get_rounding(rounding))


def stochastic_keys(rounding: str | RoundingMode, seed: int | None) -> tuple[int, int]:
    """The two srhash keys of ``seed`` (zeros when the mode is not stochastic).

    Raises:
        ValueError: stochastic rounding without a seed (as :func:`ampref.quantize`).
    """
    if get_rounding(rounding) is not RoundingMode.STOCHASTIC:
        return 0, 0
    if seed is None:
        raise ValueError("rounding='stochastic' needs seed=<int in [0, 2**64)>; "
                         "random bits are a function of (seed, element index)")
    return keys(check_seed(seed))


def scaler_arrays(cfg: ScalerConfig) -> tuple[np.ndarray, np.ndarray]:
    """(cfg_d float64[4], cfg_i int64[8]) for the device update (ampref_scaler_step)."""
    nan = float("nan")
    cfg_d = np.array([cfg.growth_factor, cfg.backoff_factor,
                      nan if cfg.min_scale is None else cfg.min_scale,
                      nan if cfg.max_scale is None else cfg.max_scale], dtype=np.float64)
    cfg_i = np.array([cfg.growth_interval, _RULES.index(cfg.growth_rule),
                      int(cfg.backoff_op == "divide"), _ARITH.index(cfg.arith), cfg.hysteresis,
                      _REFILL.index(cfg.refill), _FLOOR.index(cfg.floor),
                      int(cfg.refuse_inf_growth)], dtype=np.int64)
    return cfg_d, cfg_i


def state_row(st: ScalerState) -> np.ndarray:
    """The int64 device row of a scaler state (found flag and action cleared)."""
    row = np.zeros(ST_COUNT, dtype=np.int64)
    row[ST_SCALE] = np.array(st.scale, dtype=np.float64).view(np.int64)
    row[ST_GROWTH], row[ST_HYST] = st.growth_tracker, st.hysteresis_tracker
    row[ST_STEP], row[ST_LAST_OVERFLOW] = st.step, st.last_overflow
    return row


def state_from_row(row: np.ndarray) -> tuple[ScalerState, bool, str]:
    """(state, found_inf, action) from a device row read back to the host."""
    r = np.asarray(row, dtype=np.int64)
    scale = float(r[ST_SCALE:ST_SCALE + 1].view(np.float64)[0])
    st = ScalerState(scale=scale, growth_tracker=int(r[ST_GROWTH]),
                     hysteresis_tracker=int(r[ST_HYST]), step=int(r[ST_STEP]),
                     last_overflow=int(r[ST_LAST_OVERFLOW]))
    return st, bool(r[ST_FOUND]), ACTIONS[int(r[ST_ACTION])]


# ----------------------------------------------------------------------------- host build
def _cache_dir() -> Path:
    root = os.environ.get("AMPREF_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "ampref")
    return Path(root)


def host_compiler() -> str | None:
    """The C++ compiler used for the host build ($CXX, else g++, else clang++)."""
    for name in (os.environ.get("CXX"), "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


def _build_host_library() -> Path:
    header, harness = cuda_source(HEADER), cuda_source("host_harness.cpp")
    digest = hashlib.sha256(f"{header}\0{harness}".encode()).hexdigest()[:16]
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
        (Path(src) / HEADER).write_text(header, encoding="utf-8")
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
        self._lib.ampref_host_encode16_f32(self._ptr(src), self._ptr(out), src.size, self._ptr(params))
        return out

    def random_bits(self, k1: int, k2: int, start: int, count: int) -> np.ndarray:
        out = np.empty(count, dtype=np.uint32)
        self._lib.ampref_host_random_bits(self._ptr(out), count, k1, k2, start)
        return out

    def unscale_(self, g: np.ndarray, row: np.ndarray) -> None:
        """Unscale float32 ``g`` in place; raise ``row``'s found flag on a non-finite."""
        self._lib.ampref_host_unscale_f32(self._ptr(g), g.size, self._ptr(row))

    def scaler_update(self, row: np.ndarray, cfg_d: np.ndarray, cfg_i: np.ndarray) -> None:
        self._lib.ampref_host_scaler_update(self._ptr(row), self._ptr(cfg_d), self._ptr(cfg_i))


def nvcc_compile(source_name: str, arch: str = "sm_90") -> subprocess.CompletedProcess[str]:
    """Compile a device source to PTX with nvcc (a check that needs no GPU).

    Raises:
        RuntimeError: nvcc is not on PATH.
        ValueError: unknown source name (choices listed).
    """
    choices = {"kernels": device_source, "mma_chain": mma_source}
    if source_name not in choices:
        raise ValueError(f"unknown device source {source_name!r}; choose one of {', '.join(choices)}")
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise RuntimeError("nvcc is not on PATH")
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / f"{source_name}.cu"
        src.write_text(choices[source_name]())
        return subprocess.run([nvcc, f"-arch={arch}", "--fmad=false", "-std=c++17", "-ptx",
                               str(src), "-o", str(Path(d) / "out.ptx")],
                              capture_output=True, text=True, check=False)
