"""What determines an ``ampref train`` run: the precision modes and :class:`TrainConfig`,
which validates itself on construction (TRN-ERR-001)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ampref.distributed.collectives import REDUCE_DTYPES
from ampref.distributed.semantics import DEFAULT_DP, DP_PROFILES
from ampref.recipes.roles import RECIPE_PROFILES
from ampref.scaling.profiles import PROFILES

__all__ = ["DEFAULT_COMPARE", "MAX_MODEL_BYTES", "MODES", "Mode", "RECIPE_PROFILES", "TrainConfig",
           "TrainError"]

MAX_MODEL_BYTES = 8 * 2**30  # refuse configurations whose arrays would need more memory


class TrainError(ValueError):
    """Bad configuration, data or checkpoint: reported as one line by the CLI."""


@dataclass(frozen=True, kw_only=True)
class Mode:
    autocast: str | None
    scaler: str | None  # "dynamic" | "static" | None
    params: str = "float32"
    master_weights: bool = True
    #: GEMM recipe of the transformer blocks' linear layers (ampref.recipes.roles)
    recipe: str | None = None
    about: str = ""


MODES: dict[str, Mode] = {
    "fp32": Mode(autocast=None, scaler=None, about="float32 throughout"),
    "amp-fp16": Mode(autocast="float16", scaler="dynamic",
                     about="fp16 autocast + dynamic loss scaling"),
    "amp-bf16": Mode(autocast="bfloat16", scaler=None, about="bf16 autocast, no scaling"),
    "fp16-static": Mode(autocast="float16", scaler="static",
                        about="fp16 autocast + fixed loss scale"),
    "fp16-noscale": Mode(autocast="float16", scaler=None, about="fp16 autocast, no loss scaling"),
    "pure-fp16": Mode(autocast=None, scaler=None, params="float16", master_weights=False,
                      about="fp16 weights, activations and gradients, no master weights"),
    **{name: Mode(autocast="bfloat16", scaler=None, recipe=name,
                  about=f"{about}; the rest in bf16 autocast")
       for name, about in (
           ("fp8-delayed", "block linears in FP8, delayed per-tensor scaling (E4M3/E5M2)"),
           ("fp8-current", "block linears in FP8, current per-tensor scaling (E4M3/E5M2)"),
           ("fp8-block", "block linears in FP8, 1x128/128x128 block scales"),
           ("mxfp8", "block linears in MXFP8 E4M3, E8M0 scales per 32"),
           ("nvfp4", "block linears in NVFP4 (SR gradients, Hadamard on wgrad)"))},
}
DEFAULT_COMPARE = ("fp32", "amp-fp16", "amp-bf16", "fp16-noscale")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Everything that determines a run (a checkpoint must match all but ``steps``)."""

    precision: str = "amp-fp16"
    steps: int = 160
    seed: int = 0
    batch: int = 16
    context: int = 32
    width: int = 64
    heads: int = 4
    blocks: int = 1
    lr: float = 3e-3
    profile: str = "torch"
    init_scale: float = 2.0**16
    static_scale: float = 1024.0
    inject_nonfinite: float = 0.0
    checkpoint_every: int = 50
    hist_every: int = 0  # 0: histograms at the first and last step only
    data: str | None = None
    backend: str = "numpy"
    skip_steps: tuple[int, ...] = field(default=())
    recipe_profile: str = "te"
    #: data parallelism (DPL-TRN-*): ranks emulated in this process, the framework
    #: semantics ("" = the loss-scale profile's, DEFAULT_DP), the dtype gradients are
    #: reduced in, and (step, rank) pairs whose local gradient gets a planted +inf
    ranks: int = 1
    dp: str = ""
    reduce_dtype: str = "float32"
    plant: tuple[tuple[int, int], ...] = field(default=())

    def __post_init__(self) -> None:
        # a configuration validates itself: no invalid TrainConfig can exist
        self.validate()

    def validate(self) -> None:
        """Check every field (TRN-ERR-001).

        Raises:
            TrainError: the first bad field, named with its allowed range or choices.
        """
        # why long: one check per field, each with its own message
        if self.precision not in MODES:
            raise TrainError(f"unknown precision mode {self.precision!r}; choose one of "
                             f"{', '.join(MODES)}")
        self._validate_types()
        # steps >= 1 too: a run of no step has no loss to report or compare
        for name in ("steps", "batch", "context", "width", "heads", "blocks", "checkpoint_every"):
            v = getattr(self, name)
            if v < 1:
                raise TrainError(f"--{name.replace('_', '-')} must be an integer >= 1, "
                                 f"got {v!r}")
        if self.hist_every < 0:
            raise TrainError(f"hist_every must be an integer >= 0, got {self.hist_every!r}")
        if self.recipe_profile not in RECIPE_PROFILES:
            raise TrainError(f"unknown --recipe-profile {self.recipe_profile!r}; choose one of "
                             f"{', '.join(RECIPE_PROFILES)}")
        if self.recipe_profile == "torchao" and self.precision == "fp8-delayed":
            raise TrainError("--recipe-profile torchao has no fp8-delayed (torchao removed "
                             "delayed scaling in 2025-02); use te")
        if self.width % self.heads:
            raise TrainError(f"--width {self.width} must be divisible by --heads {self.heads}")
        need = self.memory_estimate()
        if need > MAX_MODEL_BYTES:
            raise TrainError(f"--batch {self.batch} --context {self.context} --width {self.width} "
                             f"--blocks {self.blocks} would need about {need / 2**30:.0f} GiB of "
                             f"arrays; ampref train is for small models (limit "
                             f"{MAX_MODEL_BYTES // 2**30} GiB)")
        if not (math.isfinite(self.lr) and self.lr > 0):
            raise TrainError(f"--lr must be a positive finite number, got {self.lr}")
        if self.profile not in PROFILES:
            raise TrainError(f"unknown loss-scale profile {self.profile!r}; choose one of "
                             f"{', '.join(PROFILES)}")
        if not 0.0 <= self.inject_nonfinite <= 1.0:
            raise TrainError(f"--inject-nonfinite must be a rate in [0, 1], got "
                             f"{self.inject_nonfinite}")
        if self.inject_nonfinite and MODES[self.precision].scaler is None:
            raise TrainError(f"--inject-nonfinite needs a mode with a loss scaler that skips "
                             f"non-finite steps (amp-fp16, fp16-static), not {self.precision!r}")
        if not 0 <= self.seed < 2**32:
            # below 2^32 every seed derived from it (TRN-QNT-003) fits in 64 bits
            raise TrainError(f"--seed must be an integer in [0, 2**32), got {self.seed!r}")
        f32_max = float(np.finfo(np.float32).max)
        for name in ("static_scale", "init_scale"):
            v = getattr(self, name)
            if not (math.isfinite(v) and 0 < v <= f32_max):
                flag = "--static-scale" if name == "static_scale" else "TrainConfig.init_scale"
                raise TrainError(f"{flag} must be a positive float32 value (at most 3.4e38), "
                                 f"got {v!r}")
        bad_skip = [v for v in self.skip_steps if not 0 <= v < self.steps]
        if bad_skip:  # a step the run never reaches would be removed silently
            raise TrainError(f"skip_steps must lie in [0, --steps {self.steps}), got {bad_skip}")
        self._validate_parallel()
        if self.backend != "numpy":
            from ampref import backends  # type: ignore[attr-defined]  # mapped from backends/ (pyproject)

            if not backends.available(self.backend):
                here = [n for n in backends.names() if backends.available(n)]
                raise TrainError(f"backend {self.backend!r} is not available here (choices: "
                                 f"{', '.join(here)})")

    def _validate_types(self) -> None:
        """Numbers are numbers (bool is not one), so a wrong type is named here instead of
        failing inside a comparison or a run."""
        ints = ("steps", "batch", "context", "width", "heads", "blocks", "checkpoint_every",
                "hist_every", "seed")
        reals = ("lr", "init_scale", "static_scale", "inject_nonfinite")
        # Python's own int and float: a checkpoint stores the configuration as JSON
        for name in ints + reals:
            v = getattr(self, name)
            kind: type | tuple[type, ...] = int if name in ints else (int, float)
            if isinstance(v, bool) or not isinstance(v, kind):
                want = "an int" if name in ints else "a float"
                raise TypeError(f"TrainConfig.{name} must be {want}, got "
                                f"{type(v).__name__} {v!r}")
        if not isinstance(self.skip_steps, tuple) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in self.skip_steps):
            raise TypeError(f"TrainConfig.skip_steps must be a tuple of integer steps, got "
                            f"{self.skip_steps!r}")
        if self.data is not None and not isinstance(self.data, str):
            raise TypeError(f"TrainConfig.data must be a path as str or None, got "
                            f"{type(self.data).__name__} {self.data!r}")

    def _validate_parallel(self) -> None:
        if isinstance(self.ranks, bool) or not isinstance(self.ranks, int) or self.ranks < 1:
            raise TrainError(f"--ranks must be an integer >= 1, got {self.ranks!r}")
        if self.batch % self.ranks:
            raise TrainError(f"--batch {self.batch} must be divisible by --ranks {self.ranks} "
                             "(each rank trains on an equal shard of the batch)")
        if self.dp and self.dp not in DP_PROFILES:
            raise TrainError(f"unknown --dp {self.dp!r}; choose one of {', '.join(DP_PROFILES)}")
        if self.reduce_dtype not in REDUCE_DTYPES:
            raise TrainError(f"unknown --reduce-dtype {self.reduce_dtype!r}; choose one of "
                             f"{', '.join(REDUCE_DTYPES)}")
        for pair in self.plant:
            ok = (isinstance(pair, tuple) and len(pair) == 2
                  and all(isinstance(v, int) and not isinstance(v, bool) for v in pair))
            # a step the run never reaches would plant nothing, silently
            if not ok or not (0 <= pair[0] < self.steps and 0 <= pair[1] < self.ranks):
                raise TrainError(f"--plant-overflow takes STEP@RANK with 0 <= RANK < --ranks "
                                 f"{self.ranks} and 0 <= STEP < --steps {self.steps}, "
                                 f"got {pair!r}")
        parallel = self.ranks > 1 or bool(self.plant)
        if parallel and MODES[self.precision].params != "float32":
            raise TrainError(f"--ranks/--plant-overflow reduce float32 master gradients; "
                             f"{self.precision!r} keeps {MODES[self.precision].params} "
                             "parameters without master weights")
        if parallel and self.backend != "numpy":
            raise TrainError("--ranks/--plant-overflow emulate the ranks on the numpy backend "
                             f"only, got --backend {self.backend}")

    @property
    def dp_name(self) -> str:
        """The data-parallel semantics this run uses (``--dp`` or the profile's default)."""
        return self.dp or DEFAULT_DP[self.profile]

    def memory_estimate(self) -> int:
        """Rough bytes of the largest arrays of one step: activations and their
        gradients per block (float64 temporaries included) and attention scores."""
        tokens = self.batch * self.context
        per_block = tokens * self.width * 40 + self.batch * self.heads * self.context**2 * 6
        return 8 * (self.blocks * per_block + 16 * self.blocks * self.width**2)

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("steps")
        if MODES[self.precision].recipe is None:  # only recipe modes have a recipe profile
            d.pop("recipe_profile")
        d["skip_steps"] = list(self.skip_steps)
        d["plant"] = [list(p) for p in self.plant]
        # a one-rank run without plants keeps the identity of the runs before data
        # parallelism, so their checkpoints still resume
        if self.ranks == 1 and not self.plant and not self.dp and self.reduce_dtype == "float32":
            for k in ("ranks", "dp", "reduce_dtype", "plant"):
                d.pop(k)
        return d
