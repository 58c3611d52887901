"""Every accumulation model as one row of data, and the one parser of model names
(``specs/accumulation.md`` ACC-REG-*).

A model name is read here and nowhere else: ``exact``, ``sequential``, ``pairwise``,
``fma-chain``, ``tensorcore:<gpu>`` (one NVIDIA tensor-core instruction chained over K,
or AMD's MFMA), ``cublas`` (the real cuBLAS call, on a GPU backend only) and
``cublas:<gpu>[:fast-accum][:tf32][:split-k=<S>]`` (a model of the library GEMM
cuBLAS/cuBLASLt run on that GPU, as torch calls them; ``tf32`` runs float32 operands on
the TF32 kernels, as torch's ``allow_tf32`` does; ``split-k`` names the K slices a
split-K kernel sums, which cuBLAS's heuristics choose). :func:`resolve` returns the row
and the name's parameters; the matmul front ends, every backend and ``identify_gemm``
read it. Adding a model is adding a row here and its kernel (docs/architecture.md,
"Recipes").
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

from . import gpus, mfma

__all__ = ["CLASSIC", "DEFAULT", "LIBRARY_GPUS", "LibraryGPU", "MODEL_ROWS", "ModelRow",
           "Resolved", "resolve", "model_names"]

#: the one default accumulation model of every matmul front end (ampref.matmul,
#: functional.matmul/linear/conv2d, the backends): exactly rounded, order-free, the same
#: on every machine
DEFAULT = "exact"


@dataclass(frozen=True, kw_only=True)
class ModelRow:
    """One accumulation model (a template where the name takes a GPU)."""

    #: the name, or its template (``tensorcore:<gpu>``)
    name: str
    #: "classic", "instruction" (tensor core / MFMA), "library" (a GEMM routine)
    kind: str
    #: what the model computes, in one line
    summary: str
    #: backends that run it natively (others compute it on the host reference)
    backends: tuple[str, ...]
    #: the error bound error_bound() states for it (ACC-BND-*)
    bound: str
    #: True where results are claimed bit for bit; False: only the bound is claimed
    bitwise: bool = True
    #: where the definition comes from
    source: str = ""


MODEL_ROWS: tuple[ModelRow, ...] = (
    ModelRow(name="exact", kind="classic", backends=("numpy", "cupy"), bound="exact",
             summary="the exact a.b + c rounded once to the output format",
             source="ENG-MM-001; certified float64 BLAS (accumulation/certified.py)"),
    ModelRow(name="sequential", kind="classic", backends=("numpy",), bound="sequential",
             summary="products rounded, then added left to right, each addition rounded",
             source="ACC-SEQ-001"),
    ModelRow(name="pairwise", kind="classic", backends=("numpy",), bound="pairwise",
             summary="products rounded, summed by recursive halving", source="ACC-PAIR-001"),
    ModelRow(name="fma-chain", kind="classic", backends=("numpy",), bound="fma-chain",
             summary="one correctly rounded FMA per product, left to right",
             source="ACC-FMA-001"),
    ModelRow(name="tensorcore:<gpu>", kind="instruction", backends=("numpy", "cupy"),
             bound="block-fma",
             summary="the GPU's matrix instruction (block FMA; AMD MFMA) chained over K",
             source="Khattak & Mikaitis 2025; MMA-Sim; recorded dumps (accumulation/gpus.py)"),
    ModelRow(name="cublas", kind="library", backends=("cupy",), bound="sequential",
             bitwise=False,
             summary="the real cublasGemmEx call on the device (fp16/bf16 in, fp32 out)",
             source="BKD-MM-002"),
    ModelRow(name="cublas:<gpu>[:fast-accum][:tf32][:split-k=<S>]", kind="library",
             backends=("numpy", "cupy"), bound="library",
             summary="the GEMM cuBLAS/cuBLASLt run on that GPU as torch calls them: "
                     "fp16/bf16 chained in float32 and rounded once to the output, FP8 "
                     "promoted to float32 every 128 products (or chained: fast-accum); "
                     "TF32 chained, SGEMM as float32 FMAs (tf32: float32 operands on the "
                     "TF32 kernels); split-k=S: S slices of K chained apart, summed in "
                     "float32",
             source="ACC-LIB-001..006: torch 2.11 + cuBLAS 13 on an H100 "
                    "(tests/data/h100_gemms.npz, tests/data/h100_gemms_run2.npz)"),
)

#: the models whose names take no GPU and that run on every backend's host reference
CLASSIC = ("sequential", "pairwise", "exact", "fma-chain")

@dataclass(frozen=True, kw_only=True)
class LibraryGPU:
    """A GPU with a library model (ACC-LIB-*): the instruction model its tensor-core
    kernels chain, the FP8 promotion interval without fast accumulation, and the K
    granule split-K slices are made of, per flavour (ACC-LIB-006): the largest granule
    every recorded slice length of that flavour is a multiple of."""

    #: the tensor-core instruction model (``tensorcore:<instruction>``)
    instruction: str
    #: products per FP8 partial sum before it is promoted into float32
    fp8_promotion: int
    #: split-K granule of the fp16/bf16 and FP8 kernels
    split_granule: int
    #: split-K granule of the TF32 kernels
    tf32_granule: int
    #: split-K granule of the SIMT SGEMM kernels
    sgemm_granule: int
    #: the evidence
    source: str

    def granule(self, input_format: str) -> int:
        """The split-K granule of GEMMs with this input format."""
        return {"tf32": self.tf32_granule, "float32": self.sgemm_granule}.get(
            input_format, self.split_granule)


_H100_LIB = LibraryGPU(instruction="h100", fp8_promotion=128, split_granule=128,
                       tf32_granule=4, sgemm_granule=8,
                       source="recorded on an NVIDIA H100 80GB HBM3, torch 2.11.0+cu130")

#: GPUs with a library model
LIBRARY_GPUS: dict[str, LibraryGPU] = {
    "h100": _H100_LIB,
    "h200": replace(_H100_LIB, instruction="h200",
                    source="the H100's SM 9.0 kernels [assumed: same silicon, not recorded]"),
}

#: the largest split-K slice count a name may ask for (cuBLAS's heuristics stay far
#: below; a larger count is more likely a typo than a kernel)
MAX_SPLIT_K = 1024


@dataclass(frozen=True, kw_only=True)
class Resolved:
    """A parsed model name: its row and parameters."""

    name: str
    row: ModelRow
    #: the model's kind for the kernels: "exact", "sequential", "pairwise", "fma-chain",
    #: "tensorcore", "mfma", "cublas", "library"
    kernel: str
    gpu: str | None = None
    fast_accum: bool = False
    #: K slices of a split-K library kernel (1: one chain over all of K)
    split_k: int = 1
    #: float32 operands run on the TF32 kernels (torch's ``allow_tf32``)
    tf32: bool = False


_ROWS = {r.name.split(":")[0] + (":" if ":" in r.name else ""): r for r in MODEL_ROWS}


def model_names() -> list[str]:
    """The model names and templates, for error messages and documentation."""
    return [r.name for r in MODEL_ROWS]


def _choices() -> str:
    gpus_known = ", ".join([*gpus.GPUS, *mfma.AMD_GPUS])
    return (f"{', '.join(model_names())} (tensorcore GPUs: {gpus_known}; cublas GPUs: "
            f"{', '.join(LIBRARY_GPUS)})")


@lru_cache(maxsize=256)
def resolve(accumulation: str) -> Resolved:
    """The row and parameters of a model name, parsed once per name.

    Raises:
        TypeError: not a str.
        ValueError: an unknown model, GPU or option (the choices named).
    """
    if not isinstance(accumulation, str):
        raise TypeError(f"accumulation must be a str (a model name such as 'exact' or "
                        f"'tensorcore:h100'), got {type(accumulation).__name__}")
    head, _, rest = accumulation.partition(":")
    if not rest:
        row = _ROWS.get(head)
        if row is None or head != accumulation:
            raise ValueError(f"unknown accumulation model {accumulation!r}; choose one of "
                             f"{_choices()}")
        return Resolved(name=accumulation, row=row, kernel=head)
    if head == "tensorcore":
        gpu = rest.lower()
        if gpu in mfma.AMD_GPUS or gpu in mfma.UNMODELLED:
            mfma.get_amd_gpu(gpu)  # an unmodelled one raises, saying why
            return Resolved(name=accumulation, row=_ROWS["tensorcore:"], kernel="mfma", gpu=gpu)
        if gpu not in gpus.GPUS:
            raise ValueError(f"unknown GPU {gpu!r} in {accumulation!r}; known: "
                             f"{', '.join([*gpus.GPUS, *mfma.AMD_GPUS])}")
        return Resolved(name=accumulation, row=_ROWS["tensorcore:"], kernel="tensorcore",
                        gpu=gpu)
    if head == "cublas":
        gpu, *options = rest.lower().split(":")
        if gpu not in LIBRARY_GPUS:
            raise ValueError(f"no library model for GPU {gpu!r} in {accumulation!r}; "
                             f"modelled: {', '.join(LIBRARY_GPUS)}")
        fast, tf32, split = _library_options(options, accumulation)
        return Resolved(name=accumulation, row=_ROWS["cublas:"], kernel="library", gpu=gpu,
                        fast_accum=fast, split_k=split, tf32=tf32)
    raise ValueError(f"unknown accumulation model {accumulation!r}; choose one of {_choices()}")


def _library_options(options: list[str], name: str) -> tuple[bool, bool, int]:
    """(fast_accum, tf32, split_k) from a library name's options, each at most once."""
    fast, tf32, split = False, False, 1
    seen: set[str] = set()
    for option in options:
        key = option.partition("=")[0]
        if key in seen:
            raise ValueError(f"option {key!r} given twice in {name!r}")
        seen.add(key)
        if option == "fast-accum":
            fast = True
        elif option == "tf32":
            tf32 = True
        elif key == "split-k":
            split = _split_count(option.partition("=")[2], name)
        else:
            raise ValueError(f"unknown option {option!r} in {name!r}; the options are "
                             "'fast-accum' (FP8 without promotion), 'tf32' (float32 operands "
                             "on the TF32 kernels) and 'split-k=<S>' "
                             f"(S K slices, 1..{MAX_SPLIT_K})")
    return fast, tf32, split


def _split_count(text: str, name: str) -> int:
    """The S of ``split-k=S``: a decimal integer in 1..MAX_SPLIT_K."""
    if not text.isdigit() or not 1 <= int(text) <= MAX_SPLIT_K:
        raise ValueError(f"split-k takes a slice count 1..{MAX_SPLIT_K}, got {text!r} in "
                         f"{name!r}")
    return int(text)
