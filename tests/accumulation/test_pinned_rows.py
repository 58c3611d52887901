"""The GPU and library rows are the values their sources publish (tests/data/
pinned_rows.toml, transcribed from the cited model files and records)."""

from __future__ import annotations

import pytest
from pinned import mismatches

from ampref.accumulation.gpus import GPUS
from ampref.accumulation.mfma import AMD_GPUS
from ampref.accumulation.registry import LIBRARY_GPUS


@pytest.mark.clause("ACC-TC-002")
def test_every_nvidia_gpu_row_is_its_published_model_parameters() -> None:
    """Inputs: every row of GPUS. Expected: block, fraction bits, FP8 path, alignment
    limits and input formats as tensor-core-models.md section 3 lists them (each pinned
    entry names its source). Pass: no row, field or entry missing or different."""
    assert not mismatches("gpus", GPUS), "\n".join(mismatches("gpus", GPUS))


@pytest.mark.clause("ACC-MFMA-001")
def test_every_amd_gpu_row_is_mma_sims_model() -> None:
    """Inputs: every row of AMD_GPUS. Expected: arch and per-format path (op, group,
    flush, two-stage) as MMA-Sim's CDNA models say. Pass: no difference."""
    assert not mismatches("amd_gpus", AMD_GPUS), "\n".join(mismatches("amd_gpus", AMD_GPUS))


@pytest.mark.clause("ACC-LIB-003")
def test_every_library_gpu_row_is_its_recorded_promotion_interval() -> None:
    """Inputs: every row of LIBRARY_GPUS. Expected: the instruction model and FP8
    promotion interval (128) the H100 records show. Pass: no difference."""
    problems = mismatches("library_gpus", LIBRARY_GPUS)
    assert not problems, "\n".join(problems)
