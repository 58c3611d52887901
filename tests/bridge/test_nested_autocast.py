"""Code that switches CUDA autocast off inside an emulated CUDA region (TRC-AUT-006),
against torch's real CUDA autocast read without a GPU.

Data: ``tests/data/autocast_nested_fake_cuda.json``, written by
``scripts/fake_cuda_nested.py`` with a CUDA build of torch (2.14.1+cu130) on a machine
without a GPU: the cases of ``nested_cases.py`` (``torch.autocast("cuda",
enabled=False)``, ``torch.cuda.amp.autocast(enabled=False)``, ``torch.amp.custom_fwd``
with and without ``cast_inputs``, a custom op's ``register_autocast``) on fake CUDA
tensors through torch's real ``AutocastCUDA`` kernels, each reduced to the dtypes it
observes. Before TRC-AUT-006 ampref matched 2 of the 10 records: sections switched off
kept casting, and ``custom_fwd`` left CPU tensors uncast."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

from paths import DATA  # noqa: E402
import nested_cases  # noqa: E402

RECORD = json.loads((DATA / "autocast_nested_fake_cuda.json").read_text())
DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16}


@pytest.mark.clause("TRC-AUT-006")
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(RECORD["cases"]))
def test_a_section_switched_off_inside_the_region_runs_as_cuda_runs_it(name: str,
                                                                      dtype: str) -> None:
    """TRC-AUT-006. Inputs: float32 4x4 CPU operands, the case ``name`` inside
    ampref.torch.autocast("cuda", dtype). Expected: the dtypes torch 2.14.1's CUDA
    autocast gave on fake CUDA tensors (the record), e.g. a matmul of float32 operands
    under torch.autocast("cuda", enabled=False) is float32 and custom_fwd(cast_inputs=
    float32) sees float32 inputs. Pass: every observed dtype equal."""
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with at.autocast("cuda", DTYPES[dtype]):
        got = nested_cases.CASES[name](x, w)
    assert got == RECORD["cases"][name][dtype]


@pytest.mark.clause("TRC-AUT-006")
def test_custom_fwd_outside_an_emulating_region_casts_as_torch_does() -> None:
    """Inputs: after an ampref.torch.autocast("cuda") region has come and gone (ampref's
    wrapper of torch's custom_fwd cast installed), torch's CUDA autocast flag switched on
    by hand (as a GPU machine's torch.autocast("cuda") does) and custom_fwd(device_type=
    "cuda", cast_inputs=float32) applied to float16 CPU tensors. Expected: the input stays
    float16: torch casts only tensors on the named device, and no region emulates CUDA
    on this thread. Pass: float16 seen."""
    with at.autocast("cuda", torch.float16):
        pass
    h, w = torch.randn(4, 4).half(), torch.randn(4, 4).half()
    prev = torch.is_autocast_enabled("cuda")
    torch.set_autocast_enabled("cuda", True)
    try:
        _, _, seen = nested_cases.CastToFloat32.apply(h, w)
    finally:
        torch.set_autocast_enabled("cuda", prev)
    assert seen == torch.float16


@pytest.mark.clause("TRC-AUT-006")
def test_switching_off_the_emulated_device_is_undone_when_the_section_ends() -> None:
    """Inputs: ampref.torch.autocast("cuda", float16); inside, torch.set_autocast_enabled
    ("cuda", False) for one matmul, then True again. Expected: float32 while off, float16
    after; on leaving the region CUDA autocast is off and this thread emulates nothing
    (a later custom_fwd on CPU tensors casts nothing). Pass: all three."""
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with at.autocast("cuda", torch.float16):
        torch.set_autocast_enabled("cuda", False)
        off = x @ w
        torch.set_autocast_enabled("cuda", True)
        on = x @ w
    _, _, seen = nested_cases.CastToFloat32.apply(x.half(), w.half())
    assert (off.dtype, on.dtype, seen) == (torch.float32, torch.float16, torch.float16)
    assert not torch.is_autocast_enabled("cuda")


@pytest.mark.clause("TRC-AUT-006", "TRC-CUD-001")
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(set(RECORD["cases"]) - {"outside_op_off"}))
def test_inside_emulate_a_cuda_scripts_own_autocast_calls_give_the_recorded_dtypes(
        name: str, dtype: str) -> None:
    """TRC-AUT-006 with TRC-CUD-001. Inputs: float32 4x4 CPU operands, the case ``name``
    inside ampref.torch.emulate() and the script's own torch.autocast("cuda", dtype) (the
    custom op of ``outside_op_off`` has no reference numerics under emulate: left out).
    Expected: the recorded dtypes of torch's CUDA autocast. Pass: every one equal."""
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    with at.emulate(), torch.autocast("cuda", dtype=DTYPES[dtype]):
        got = nested_cases.CASES[name](x, w)
    assert got == RECORD["cases"][name][dtype]


@pytest.mark.clause("TRC-AUT-006")
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(RECORD["cases"]))
def test_on_a_gpu_the_cases_give_the_fake_cuda_record(name: str, dtype: str) -> None:
    """TRC-AUT-006, GPU only (skipped without CUDA; run by scripts/gpu_check.sh). Inputs:
    float32 4x4 CUDA operands, the case ``name`` inside torch's own
    torch.autocast("cuda", dtype). Expected: the dtypes recorded on fake CUDA tensors
    without a GPU, i.e. the oracle this file replays is the device's behaviour. Pass:
    every observed dtype equal."""
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    x, w = torch.randn(4, 4, device="cuda"), torch.randn(4, 4, device="cuda")
    with torch.autocast("cuda", dtype=DTYPES[dtype]):
        got = nested_cases.CASES[name](x, w)
    assert got == RECORD["cases"][name][dtype]
