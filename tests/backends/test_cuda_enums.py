"""The CUDA and cuBLAS enumerator values the GPU backend passes to ``cublasGemmEx``
(BKD-MM-002), pinned to CUDA's headers: a wrong value would multiply the wrong format or
pick another compute type, and only a GPU run would show it."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from ampref.backends.cuda_kernels import CUBLAS_ENUMS, CUDA_DATA_TYPES

#: values cited from CUDA 13.0's include/library_types.h (cudaDataType_t) and cuBLAS
#: 13's include/cublas_api.h (cublasOperation_t, cublasComputeType_t, cublasGemmAlgo_t)
CITED_DATA_TYPES = {"CUDA_R_16F": 2, "CUDA_R_16BF": 14, "CUDA_R_32F": 0}
CITED_CUBLAS = {"CUBLAS_OP_N": 0, "CUBLAS_COMPUTE_32F": 68, "CUBLAS_GEMM_DEFAULT_TENSOR_OP": 99}
_NAMES = {"float16": "CUDA_R_16F", "bfloat16": "CUDA_R_16BF", "float32": "CUDA_R_32F"}


def _include_dirs() -> list[Path]:
    """Where CUDA headers may be: $CUDA_PATH, /usr/local/cuda, NVIDIA's pip packages."""
    dirs = [Path(p) / "include" for p in (os.environ.get("CUDA_PATH"), "/usr/local/cuda") if p]
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        dirs += sorted(Path(root).glob("*/include"))
    return dirs


def _header_values(header: str, names: set[str]) -> dict[str, int]:
    for d in _include_dirs():
        if (d / header).is_file():
            text = (d / header).read_text(errors="replace")
            return {m[1]: int(m[2]) for m in re.finditer(r"\b(\w+)\s*=\s*(\d+)\s*,", text)
                    if m[1] in names}
    pytest.skip(f"{header} is not installed here")


@pytest.mark.clause("BKD-MM-002")
def test_the_backends_cuda_enumerators_are_the_cited_header_values() -> None:
    """Inputs: the backend's tables. Expected: each format's cudaDataType and each cuBLAS
    enumerator equal to the value cited from CUDA 13.0 / cuBLAS 13 headers. Pass: equal."""
    assert {_NAMES[k]: v for k, v in CUDA_DATA_TYPES.items()} == CITED_DATA_TYPES
    assert CUBLAS_ENUMS == CITED_CUBLAS


@pytest.mark.clause("BKD-MM-002")
@pytest.mark.parametrize("header, cited", [("library_types.h", CITED_DATA_TYPES),
                                           ("cublas_api.h", CITED_CUBLAS)])
def test_the_cited_values_are_those_of_the_installed_cuda_headers(
        header: str, cited: dict[str, int]) -> None:
    """Inputs: the first installed copy of ``header`` (CUDA toolkit or NVIDIA's pip
    packages; skipped where none is). Expected: every cited enumerator defined there with
    the cited value. Pass: equal."""
    assert _header_values(header, set(cited)) == cited
