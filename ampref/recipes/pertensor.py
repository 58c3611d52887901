"""Per-tensor FP8 scaling (Transformer Engine's delayed and current scaling) and the
amax-to-scale rules that FP8 block scaling shares, one variant per profile.

Clause IDs refer to ``specs/recipes.md`` (FP8-*, REC-SCL-*). The TE rules are float32
arithmetic as in the CUDA kernels; torchao's divides in float64 (REC-SCL-003).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from ampref.common.checks import check_flag, check_real, real_float32
from ampref.formats.cast import encode
from ampref.formats.table import Format, get_format

__all__ = ["amax", "DelayedScaling", "DelayedState", "current_scale", "quantize_per_tensor",
           "scales_from_amax", "FLT_MAX"]

FLT_MAX = float(np.finfo(np.float32).max)


def amax(x: npt.ArrayLike) -> np.float32:
    """max |x| ignoring NaN, inf propagating (CUDA fmaxf semantics; FP8-AMX-001)."""
    a = np.abs(real_float32("x", x)).reshape(-1)
    return np.float32(np.fmax.reduce(a, initial=0.0))


def _fp8_max(fmt: str | Format) -> np.float32:
    f = get_format(fmt)
    if f.name not in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        raise ValueError(f"FP8 recipes scale to e4m3, e5m2 (or e2m1), got {f.name}")
    return np.float32(f.max)


# ----------------------------------------------------------------------- delayed scaling
@dataclass(frozen=True, kw_only=True)
class DelayedState:
    """Scale and amax history (row 0 is this step's staging slot)."""

    scale: np.float32
    history: npt.NDArray[np.float32]


@dataclass(frozen=True, kw_only=True)
class DelayedScaling:
    """Transformer Engine's DelayedScaling for one quantizer (FP8-DEL-*).

    ``kernel="fused"`` is the default CUDA bulk update (scale = (fp8_max * 2^-margin) /
    amax, and a zero staged amax leaves history and scale untouched); ``"unfused"`` is
    the Python path (scale = (fp8_max / amax) / 2^margin, always rolls).
    """

    fp8_format: str = "e4m3"
    margin: int = 0
    amax_history_len: int = 1024
    amax_compute_algo: Literal["max", "most_recent"] = "max"
    kernel: Literal["fused", "unfused"] = "fused"

    def __post_init__(self) -> None:
        _fp8_max(self.fp8_format)
        if not isinstance(self.amax_history_len, int) or self.amax_history_len < 1:
            raise ValueError(f"amax_history_len must be a positive int, got "
                             f"{self.amax_history_len!r}")
        if self.amax_compute_algo not in ("max", "most_recent"):
            raise ValueError(f"amax_compute_algo must be 'max' or 'most_recent', got "
                             f"{self.amax_compute_algo!r}")
        if self.kernel not in ("fused", "unfused"):
            raise ValueError(f"kernel must be 'fused' or 'unfused', got {self.kernel!r}")
        if not isinstance(self.margin, int) or self.margin < 0:
            raise ValueError(f"margin must be a non-negative int, got {self.margin!r}")

    def init(self) -> DelayedState:
        return DelayedState(scale=np.float32(1.0),
                            history=np.zeros(self.amax_history_len, np.float32))

    def record(self, st: DelayedState, x: npt.ArrayLike) -> DelayedState:
        """Stage this step's amax of ``x`` in history row 0."""
        self._check_state(st)
        h = st.history.copy()
        h[0] = np.fmax(h[0], amax(x))
        return replace(st, history=h)

    def update(self, st: DelayedState) -> DelayedState:
        """Compute the new scale from the history, then roll it (FP8-DEL-002..004).

        Raises:
            TypeError: ``st`` is not a :class:`DelayedState` of this recipe's history length.
        """
        self._check_state(st)
        h = st.history
        if self.kernel == "fused" and h[0] == 0:
            return st  # module did not run: nothing staged, nothing changes
        a = np.float32(np.fmax.reduce(h)) if self.amax_compute_algo == "max" else h[0]
        fmax = _fp8_max(self.fp8_format)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            if self.kernel == "fused":
                sf = np.float32(fmax * np.float32(2.0**-self.margin)) / a
            else:
                sf = (fmax / a) / np.float32(2.0**self.margin)
        sf = np.float32(sf)
        if not (a > 0) or not np.isfinite(a):
            sf = st.scale
        elif np.isinf(sf):
            sf = np.float32(FLT_MAX)
        rolled = np.roll(h, -1)
        rolled[0] = 0
        return DelayedState(scale=np.float32(sf), history=rolled)

    def _check_state(self, st: Any) -> None:
        if not isinstance(st, DelayedState):
            raise TypeError(f"expected a DelayedState (from DelayedScaling.init()), got "
                            f"{type(st).__name__}: {st!r}")
        if np.shape(st.history) != (self.amax_history_len,):
            raise TypeError(f"DelayedState history has shape {np.shape(st.history)}, this recipe "
                            f"keeps {self.amax_history_len} entries")

    def frozen_by_inf(self, st: DelayedState) -> bool:
        """True while an inf amax in the window keeps the scale frozen (diagnostic)."""
        return self.amax_compute_algo == "max" and bool(np.isinf(st.history).any())


# ----------------------------------------------------------------------- current scaling
def current_scale(amax_value: float, fp8_format: str = "e4m3", *, epsilon: float = 0.0,
                  pow2: bool = False, value_for_inf: float | None = FLT_MAX,
                  inf_amax: Literal["cuda", "te-python-reference"] = "cuda") -> np.float32:
    """Transformer Engine's compute_scale_from_amax (FP8-CUR-001).

    amax, epsilon and value_for_inf are read as float32 (past its range: inf, as TE's
    float32 kernel stores them); amax < epsilon -> epsilon (NaN passes); amax in {0, inf,
    NaN} -> 1.0 (CUDA), except ``inf_amax="te-python-reference"`` (TE's test reference)
    which gives 0.0 for +inf;
    scale = float32(fp8_max / amax); an infinite scale -> ``value_for_inf`` (FLT_MAX per
    tensor, the input dtype's max for block scaling, ``None`` keeps inf as TE/JAX does);
    ``pow2`` clears the fraction bits (rounds down to a power of two).

    Raises:
        TypeError: a non-number amax, epsilon or value_for_inf, a non-bool pow2.
        ValueError: a negative or non-finite epsilon; an unknown inf_amax or format.
    """
    amax_value = check_real("amax_value", amax_value, finite=False)  # inf/NaN: defined
    epsilon = check_real("epsilon", epsilon, lo=0.0)
    pow2 = check_flag("pow2", pow2)
    if value_for_inf is not None:
        value_for_inf = check_real("value_for_inf", value_for_inf, finite=False)
    if inf_amax not in ("cuda", "te-python-reference"):
        raise ValueError(f"inf_amax must be 'cuda' or 'te-python-reference', got "
                         f"{inf_amax!r}")
    with np.errstate(over="ignore"):  # read as float32: past its range, inf (defined above)
        a, eps32 = np.float32(amax_value), np.float32(epsilon)
    if a < eps32:
        a = eps32
    if np.isinf(a) and inf_amax == "te-python-reference":
        return np.float32(0.0)
    if np.isinf(a) or a == 0 or np.isnan(a):
        return np.float32(1.0)
    with np.errstate(over="ignore"):
        s = np.float32(_fp8_max(fp8_format) / a)
    if np.isinf(s) and value_for_inf is not None:
        with np.errstate(over="ignore"):
            s = np.float32(value_for_inf)
    if pow2:
        s = np.array([s], np.float32).view(np.uint32) & np.uint32(0xFF800000)
        s = s.view(np.float32)[0]
    return np.float32(s)


def quantize_per_tensor(x: npt.ArrayLike, scale: float, fp8_format: str = "e4m3"
                        ) -> tuple[npt.NDArray[np.uint8], np.float32]:
    """FP8 codes of fp32(x * scale) with satfinite nearest-even, and scale_inv = fl32(1/scale).

    Raises:
        ValueError: ``scale`` not a positive finite float32 value (0, negative, NaN and inf
            would turn every element into 0, NaN or ±max).
    """
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise TypeError(f"scale must be a number, got {type(scale).__name__}: {scale!r}")
    with np.errstate(over="ignore"):
        s32 = np.float32(scale)
    if not (np.isfinite(s32) and s32 > 0):
        raise ValueError(f"scale must be a positive finite float32 value, got {scale!r}")
    xs = real_float32("x", x) * s32
    codes = encode(xs, fp8_format, saturate=True)
    with np.errstate(divide="ignore"):
        inv = np.float32(np.float64(1.0) / np.float64(np.float32(scale)))
    return codes, inv


# ------------------------------------------------- amax -> scale, one variant per profile
def _pow2_mask(s: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """TE kernel: keep sign and exponent bits (round down to a power of two)."""
    return (s.view(np.uint32) & np.uint32(0xFF800000)).view(np.float32)


def _scales_te(a: Any, fmax: np.float32, eps: float, pow2: bool, inf_value: float) -> Any:
    """compute_scale_from_amax (recipe_common.cuh), vectorised (REC-SCL-001)."""
    a = np.where(a < np.float32(eps), np.float32(eps), a)  # NaN < eps is False: NaN passes
    special = np.isinf(a) | (a == 0) | np.isnan(a)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = (fmax / np.where(special, np.float32(1), a)).astype(np.float32)
    s = np.where(np.isinf(s), np.float32(inf_value), s).astype(np.float32)
    s = _pow2_mask(s) if pow2 else s
    return np.where(special, np.float32(1), s).astype(np.float32)


def _scales_te_reference(a: Any, fmax: np.float32, eps: float, pow2: bool,
                         inf_value: float) -> Any:
    """scale_from_amax_tensor (TE tests/pytorch/references/quantize_scale_calc.py;
    REC-SCL-002): no inf/NaN rule, inf amax gives scale 0 (pow2 too), NaN stays NaN
    (pow2: frexp(NaN) has exponent 0, so 2^-1)."""
    a = np.where(np.isnan(a), a, np.maximum(a, np.float32(eps))).astype(np.float32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = (fmax / a).astype(np.float32)
    s = np.where(np.isinf(s), np.float32(inf_value), s).astype(np.float32)
    if pow2:
        _, e = np.frexp(np.where(np.isnan(s), 1.0, s))
        e = np.where(np.isnan(s), 0, e)
        s = np.ldexp(np.float32(1), (e - 1).astype(np.int32)).astype(np.float32)
        s = np.where(np.isinf(a), np.float32(0), s)
    return np.where(a == 0, np.float32(1), s).astype(np.float32)


def _scales_torchao(a: Any, fmax: np.float32, eps: float, pow2: bool, inf_value: float) -> Any:
    """torchao amax_to_scale: float64 max / clamp(amax, eps), cast to float32; pow2 =
    exp2(floor(log2(s))) in float32 (REC-SCL-003). ``inf_value`` is unused: torchao keeps
    no rule for an infinite scale (it cannot occur with eps > 0)."""
    del inf_value
    a64 = np.where(np.isnan(a), np.nan, np.maximum(a.astype(np.float64), eps))
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        s = (np.float64(fmax) / a64).astype(np.float32)
        if pow2:  # log2f as a correctly rounded float32 (recorded torch vectors agree)
            lg = np.log2(s.astype(np.float64)).astype(np.float32)
            s = np.exp2(np.floor(lg)).astype(np.float32)
    return s.astype(np.float32)


_SCALE_RULES = {"te": _scales_te, "te-reference": _scales_te_reference,
                "torchao": _scales_torchao}


def scales_from_amax(a: npt.ArrayLike, fp8_format: str, rule: str, *, epsilon: float,
                     pow2: bool, inf_value: float) -> tuple[Any, Any]:
    """(scale, scale_inv) per amax under ``rule`` ("te", "te-reference", "torchao");
    scale_inv = fl32(1 / scale) (0 -> inf). ``inf_value`` replaces an infinite scale
    (TE: FLT_MAX per tensor, the input dtype's max for blocks)."""
    s = _SCALE_RULES[rule](np.asarray(a, np.float32), _fp8_max(fp8_format), epsilon, pow2,
                           inf_value)
    with np.errstate(divide="ignore"):
        inv = (np.float32(1) / s).astype(np.float32)
    return s, inv
