"""The CUDA sources of the CuPy backend and the parameter rows they read.

``backends/cuda/ampref_kernels.cuh`` holds the element functions (quantize, stochastic
bits, loss-scale update, unscale) written for both NVRTC and a host C++ compiler. The
CuPy backend compiles ``kernels.cu`` + that header on the device
(:mod:`ampref.backends.cuda_kernels`); :mod:`ampref.backends.hostbuild` compiles
``host_harness.cpp`` + the same header for the host, so the recipes the GPU executes are
tested bit for bit against the NumPy reference on any machine (BKD-SRC-001).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from ampref.formats.table import Encoding, Format, get_format
from ampref.formats.rounding import RoundingMode, get_rounding
from ampref.scaling.machine import ScalerConfig, ScalerState
from ampref.kernels.srhash import keys, check_seed

__all__ = [
    "ACTIONS",
    "HEADERS",
    "TILE",
    "cuda_source",
    "device_source",
    "format_params",
    "mma_source",
    "rounding_index",
    "scaler_arrays",
    "state_from_row",
    "state_row",
]

HEADER = "ampref_kernels.cuh"
#: the headers of the device numerics, in include order (the exact dot product, the
#: optimizer and the statistics build on the first one's types and bit casts)
HEADERS = (HEADER, "exact_dot.cuh", "optim.cuh", "counts.cuh")


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

#: side of the WMMA tiles of the tensor-core chain kernel (mma_chain.cu)
TILE = 16

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
    """One NVRTC source: the shared headers followed by the kernel entry points."""
    return "\n".join([*(cuda_source(h) for h in HEADERS), cuda_source("kernels.cu")])


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
