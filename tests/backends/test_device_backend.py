"""The CuPy device backend (specs/backends.md BKD-*).

Two layers. On any machine with a C++ compiler, the device kernels' source is built for
the host and compared bit for bit with the NumPy reference, and the whole engine runs on
the device backend with a strict stand-in for CuPy (tests/strictxp.py). On a machine
with CuPy and a CUDA device, the same properties are checked on the GPU, plus the
tensor-core kernels (BKD-MM-002/003); without one those tests skip.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
import oracle
import sr_cases
import strictxp
from strict_kernels import StrictHostKernels
from hypothesis import given
from hypothesis import strategies as st

from ampref import backends
from ampref import get_format, quantize
from ampref.formats.cast import value_table
from ampref.formats.table import FORMATS, Encoding
from ampref.formats.rounding import RoundingMode
from ampref.scaling.scaler import LossScaler
from ampref.scaling.machine import ScaleFloorError, initial_state, transition
from ampref.scaling.profiles import PROFILES
from ampref.kernels.srhash import random_bits
from ampref.backends import hostbuild, kernelsrc
from ampref.backends.device import DeviceBackend

pytestmark = pytest.mark.skipif(hostbuild.host_compiler() is None,
                                reason="no C++ compiler for the host build of the kernels")


def _hex(a: np.ndarray) -> str:
    return " ".join(f"0x{int(v):0{a.dtype.itemsize * 2}x}" for v in np.ravel(a)[:4])


def assert_bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    u = {4: np.uint32, 8: np.uint64, 2: np.uint16}[want.dtype.itemsize]
    g, w = np.ascontiguousarray(got).view(u), np.ascontiguousarray(want).view(u)
    bad = np.flatnonzero(g.reshape(-1) != w.reshape(-1))
    if bad.size:
        i = bad[:4]
        raise AssertionError(f"{what}: {bad.size} of {w.size} differ; first at {i.tolist()}: "
                             f"got {_hex(g.reshape(-1)[i])}, want {_hex(w.reshape(-1)[i])}")


@pytest.fixture(scope="module")
def host() -> hostbuild.HostKernels:
    return hostbuild.HostKernels()


@pytest.fixture(scope="module")
def emulated(host: hostbuild.HostKernels) -> DeviceBackend:
    """The device backend on the host: strict arrays, host-built kernels."""
    be = DeviceBackend(strictxp, StrictHostKernels(host), "cupy-host")
    backends.register("cupy-host", be)
    return be


def _inputs32(n: int, seed: int) -> np.ndarray:
    """Random bit patterns, values spread over every format's range, and the specials."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    spread = (rng.standard_normal(n) * np.exp2(rng.integers(-40, 20, n))).astype(np.float32)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001,
                        0x7F800001, 1, 0x80000001, 0x7F7FFFFF, 0x00800000, 0x007FFFFF],
                       dtype=np.uint32).view(np.float32)
    # exact ties: midpoints of neighbouring values of the small formats (exact in float32)
    ties = []
    for name in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"):
        t = np.unique(value_table(FORMATS[name])[np.isfinite(value_table(FORMATS[name]))])
        ties.append(((t[:-1].astype(np.float64) + t[1:]) / 2).astype(np.float32))
    return np.concatenate([bits, spread, special, *ties])


# -------------------------------------------------------------------------- sources
@pytest.mark.clause("BKD-SRC-002")
def test_kernel_enumerations_follow_the_python_definitions() -> None:
    """Inputs: the #defines of the CUDA header. Expected: rounding modes, encodings, scaler
    actions, state slots and the parameter count equal the Python definitions. Pass: each
    equal."""
    text = kernelsrc.cuda_source(kernelsrc.HEADER)

    def defines(prefix: str) -> dict[str, int]:
        return {m[1]: int(m[2]) for m in re.finditer(rf"#define {prefix}(\w+) (\d+)", text)}

    assert defines("AMPREF_RND_") == {m.name: i for i, m in enumerate(RoundingMode)}
    assert defines("AMPREF_ENC_") == {e.name: i for i, e in enumerate(Encoding)}
    assert defines("AMPREF_ACT_") == {a.upper(): i for i, a in enumerate(kernelsrc.ACTIONS)}
    slots = defines("AMPREF_ST_")
    assert slots["COUNT"] == kernelsrc.ST_COUNT and slots["FOUND"] == kernelsrc.ST_FOUND
    assert slots["SCALE"] == kernelsrc.ST_SCALE and slots["ACTION"] == kernelsrc.ST_ACTION
    assert defines("AMPREF_P_")["COUNT"] == kernelsrc.format_params("fp16").size


@pytest.mark.clause("BKD-SRC-001")
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
@pytest.mark.parametrize("source", ["kernels", "mma_chain"])
def test_device_sources_compile_for_hopper_with_nvcc(source: str) -> None:
    """Inputs: kernels.cu and mma_chain.cu (skipped without nvcc). Expected: nvcc compiles
    them for sm_90. Pass: exit 0."""
    proc = hostbuild.nvcc_compile(source, "sm_90")
    assert proc.returncode == 0, proc.stderr


def test_format_params_refuse_storage_only_formats() -> None:
    with pytest.raises(ValueError, match="float64 is storage-only"):
        kernelsrc.format_params("float64")


# -------------------------------------------------------------------------- quantize
@pytest.mark.clause("BKD-SRC-001", "BKD-QNT-001")
@pytest.mark.parametrize("name", list(FORMATS))
def test_host_built_quantize_kernel_matches_reference_bitwise(host: hostbuild.HostKernels,
                                                               name: str) -> None:
    """Inputs: 20,000 float32 bit patterns, spread values, specials and ties, their float64
    widenings and 20,000 random float64 patterns; every format, mode, saturate and flush
    flag. Expected: the host build of the CUDA quantize kernel equals ampref.quantize.
    Pass: bitwise equal."""
    x32 = _inputs32(20000, 1)
    with np.errstate(invalid="ignore"):  # signalling NaNs quieten in the widening
        wide = x32.astype(np.float64) * (1 + 2.0**-40)
    x64 = np.concatenate([wide,
                          np.random.default_rng(2).integers(0, 2**64, 20000, dtype=np.uint64)
                          .view(np.float64)])
    params = kernelsrc.format_params(name)
    for rnd in RoundingMode:
        seed = 2**40 + 7 if rnd is RoundingMode.STOCHASTIC else None
        k1, k2 = kernelsrc.stochastic_keys(rnd, seed)
        for sat in (False, True):
            for sub in (True, False):
                for x in (x32, x64):
                    want = quantize(x, name, rnd.value, saturate=sat, subnormals=sub, seed=seed)
                    got = host.quantize(x, params, kernelsrc.rounding_index(rnd), sat, sub, k1, k2)
                    assert_bits_equal(got, want, f"{name} {rnd.value} saturate={sat} "
                                                 f"subnormals={sub} {x.dtype}")


@pytest.mark.clause("BKD-QNT-001")
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=64),
       name=st.sampled_from(["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
                             "float8_e8m0fnu", "float4_e2m1fn"]),
       rnd=st.sampled_from(list(RoundingMode)), seed=st.integers(0, 2**64 - 1))
def test_host_built_quantize_agrees_on_any_float32_bits(
        host: hostbuild.HostKernels, bits: list[int], name: str, rnd: RoundingMode,
        seed: int) -> None:
    """Inputs: hypothesis float32 bit patterns, formats, modes and seeds. Expected: the
    host-built kernel equals ampref.quantize. Pass: bitwise equal."""
    x = np.array(bits, dtype=np.uint32).view(np.float32)
    k1, k2 = kernelsrc.stochastic_keys(rnd, seed)
    want = quantize(x, name, rnd.value, seed=seed if rnd is RoundingMode.STOCHASTIC else None)
    got = host.quantize(x, kernelsrc.format_params(name), kernelsrc.rounding_index(rnd), False,
                        True, k1, k2)
    assert_bits_equal(got, want, f"{name} {rnd.value}")


@pytest.mark.clause("BKD-QNT-002")
@pytest.mark.parametrize("seed,start", [(0, 0), (12345, 7), (2**63 + 5, 2**32 - 3),
                                        (2**64 - 1, 2**40)])
def test_kernel_random_words_are_the_srhash_words(host: hostbuild.HostKernels, seed: int,
                                                  start: int) -> None:
    """Inputs: seeds 0, 12345, 2^63 + 5, 2^64 - 1 at several start indices, 5000 words
    each. Expected: the host-built kernel's words equal srhash.random_bits. Pass: bitwise
    equal."""
    k1, k2 = kernelsrc.stochastic_keys("stochastic", seed)
    assert_bits_equal(host.random_bits(k1, k2, start, 5000), random_bits(seed, start, 5000),
                      f"seed {seed} start {start}")


@pytest.mark.clause("BKD-QNT-002", "FMT-SR-001")
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn"])
def test_device_stochastic_rounding_flips_exactly_at_each_elements_word(
        emulated: DeviceBackend, name: str) -> None:
    """Inputs: 300 float64 elements whose fraction is built from the element's own word for
    seed 2024 (FMT-SR-002's recipe, tests/oracle.py): w/2^32, (w + 1)/2^32, (w + 1/2)/2^32
    in turn (tests/sr_cases.py), through the device backend's quantize on the host build of
    the CUDA kernels. Expected: lo, hi, lo by exact arithmetic. Pass: bitwise equal."""
    fmt = FORMATS[name]
    x, want = sr_cases.seeded_cases(fmt, [oracle.sr_bits(2024, i)
                                          for i in range(300)])
    got = emulated.to_numpy(emulated.quantize(strictxp.asarray(x), name, "stochastic",
                                              seed=2024))
    want = np.where(want == 0, 0.0, want) if not fmt.has_negative_zero else want
    assert_bits_equal(got, want, f"{name} stochastic at the word")


@pytest.mark.clause("BKD-BF16-001")
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_encode16_gives_the_format_codes_of_representable_values(emulated: DeviceBackend,
                                                                 host: hostbuild.HostKernels,
                                                                 name: str) -> None:
    """Inputs: every finite fp16 and bf16 value. Expected: encode16 returns its code, and
    ml_dtypes decodes the codes back to the values. Pass: bitwise equal."""
    from ampref import as_ml_dtype, decode

    codes = np.arange(2**16, dtype=np.uint32)
    values = decode(codes, name)
    finite = np.isfinite(values)
    got = host.encode16(values[finite], kernelsrc.format_params(name))
    # -0.0 and +0.0 decode to distinct values, so every finite code comes back
    assert_bits_equal(got, codes[finite].astype(np.uint16), f"{name} codes")
    assert_bits_equal(as_ml_dtype(got, name).astype(np.float32), values[finite],
                      f"{name} via ml_dtypes")


def test_device_quantize_errors_name_the_problem(emulated: DeviceBackend) -> None:
    with pytest.raises(TypeError, match="int32"):
        emulated.quantize(strictxp.asarray(np.arange(3, dtype=np.int32)), "fp16")
    with pytest.raises(ValueError, match="needs seed"):
        emulated.quantize(strictxp.asarray(np.ones(3, np.float32)), "fp16", "stochastic")
    with pytest.raises(ValueError, match="unknown format"):
        emulated.quantize(strictxp.asarray(np.ones(3, np.float32)), "fp17")
    with pytest.raises(ValueError, match="start and count"):
        emulated.random_bits(1, -1, 5)
    # the word index is a 64-bit counter: a range past 2^63 is refused, not wrapped
    with pytest.raises(ValueError, match="start=9223372036854775807, count=2"):
        emulated.random_bits(1, 2**63 - 1, 2)
    assert emulated.random_bits(1, 2**63 - 2, 2).shape == (2,)
    with pytest.raises(ValueError, match="16-bit format"):
        emulated.encode16(strictxp.asarray(np.ones(3, np.float32)), "e4m3")
    with pytest.raises(ValueError, match="needs cuBLAS"):
        emulated.matmul(strictxp.asarray(np.ones((2, 2), np.float32)),
                        strictxp.asarray(np.ones((2, 2), np.float32)), "cublas", "float16")


# -------------------------------------------------------------------------- loss scaling
def _found_sequence(n: int, seed: int) -> list[bool]:
    """Clean runs, isolated overflows and overflow bursts."""
    rng = np.random.default_rng(seed)
    out: list[bool] = []
    while len(out) < n:
        out += [False] * int(rng.integers(0, 12)) + [True] * int(rng.choice([1, 1, 2, 5, 40]))
    return out[:n]


_SCALER_CASES: list[tuple[str, dict[str, float]]] = [(name, {}) for name in PROFILES] + [
    ("torch", {"growth_interval": 3, "init_scale": 2.0**120}),  # growth to inf is refused
    ("keras3", {"growth_interval": 2, "init_scale": 2.0**120}),  # ... or taken (keras3)
    ("deepspeed", {"growth_interval": 4, "init_scale": 4.0}),    # the floor raises
    ("megatron", {"growth_interval": 3, "hysteresis": 3, "init_scale": 8.0}),
    ("jmp", {"growth_interval": 3, "init_scale": 3.0}),           # division by growth
    ("apex", {"init_scale": 2.0**23}),                            # the cap at 2^24
    ("tf-keras", {"growth_interval": 2, "init_scale": 1.5}),
    ("torch", {"growth_factor": 3.0, "backoff_factor": 0.3, "growth_interval": 2,
               "init_scale": 1e-30}),                              # inexact f64_to_f32 steps
]


@pytest.mark.clause("BKD-SCL-002")
@pytest.mark.parametrize("name,overrides", _SCALER_CASES)
def test_device_update_kernel_follows_the_reference_transition(
        host: hostbuild.HostKernels, name: str, overrides: dict[str, Any]) -> None:
    """Inputs: each scaler profile with overrides, 600 seeded overflow flags, through the
    host-built update kernel. Expected: the reference transition's state and action at
    every step (and the raise). Pass: equal each step, scale bits included."""
    cfg = LossScaler.from_profile(name, **overrides).config
    cfg_d, cfg_i = kernelsrc.scaler_arrays(cfg)
    ref = initial_state(cfg)
    row = kernelsrc.state_row(ref)
    seed = sum(map(ord, name)) + len(overrides)  # stable across processes (no str hash)
    for step, found in enumerate(_found_sequence(600, seed)):
        row[kernelsrc.ST_FOUND] = int(found)
        try:
            ref, ev = transition(cfg, ref, found)
            want_action = ev.action
        except ScaleFloorError:
            want_action = "raise"
        host.scaler_update(row, cfg_d, cfg_i)
        got, _got_found, action = kernelsrc.state_from_row(row)
        assert action == want_action, f"step {step}: action {action}, reference {want_action}"
        assert got == ref, f"step {step} ({'overflow' if found else 'clean'}): {got} != {ref}"
        assert float(np.float64(got.scale)).hex() == float(ref.scale).hex()
        if action == "raise":
            break


@pytest.mark.clause("BKD-SCL-001")
@pytest.mark.parametrize("scale", [65536.0, 3.0, 2.0**-20, 0.0])
def test_unscale_kernel_matches_the_reference_unscale(host: hostbuild.HostKernels,
                                                      scale: float) -> None:
    """Inputs: 1000 gradients over 2^-30..2^30 with an inf, -inf or NaN planted, scales
    65536, 3, 2^-20, 0. Expected: the reference unscale's values and found flag. Pass:
    bitwise equal."""
    rng = np.random.default_rng(3)
    for plant in (None, np.inf, -np.inf, np.nan):
        g = (rng.standard_normal(1000) * np.exp2(rng.integers(-30, 30, 1000))).astype(np.float32)
        if plant is not None:
            g[17] = plant
        ref = LossScaler(init_scale=1.0, arith="f64")
        ref.state = replace(ref.state, scale=scale)
        (want,), want_found = ref.unscale([g.copy()])
        row = kernelsrc.state_row(ref.state)
        got = g.copy()
        host.unscale_(got, row)
        assert_bits_equal(got, want, f"unscale by {scale} with {plant}")
        assert bool(row[kernelsrc.ST_FOUND]) == want_found


# -------------------------------------------------------------------------- engine
def test_strict_arrays_refuse_implicit_host_conversion() -> None:
    d = strictxp.asarray(np.ones(3, np.float32))
    with pytest.raises(strictxp.ImplicitHostTransfer):
        np.asarray(d)
    with pytest.raises(strictxp.ImplicitHostTransfer):
        np.sum(d)
    with pytest.raises(strictxp.ImplicitHostTransfer):
        d + np.ones(3, np.float32)
    assert float(strictxp.sum(d)) == 3.0 and isinstance(np.float32(2) * d, strictxp.DeviceArray)


def _train(backend: str, mode: str, steps: int,
           **kw: Any) -> tuple[list[np.ndarray], list[Any], Any]:
    from ampref.training.corpus import Corpus, load_corpus
    from ampref.training.run import Run
    from ampref.training.config import TrainConfig

    cfg = TrainConfig(precision=mode, steps=steps, batch=4, context=16, width=32, heads=2,
                      backend=backend, **kw)
    run = Run(cfg, Corpus(load_corpus(None), cfg.context))
    for _ in range(steps):
        run.step()
    params = [p.numpy() for p in run.model.parameters()]
    masters = [None if m is None else run.opt.params[0].backend.to_numpy(m) for m in run.opt.master]
    hist = [(r["loss"], r["applied"], r.get("scale_after"), r.get("underflow", None))
            for r in run.state.history]
    events = run.scaler.audit_log() if run.scaler is not None else []
    return params + [m for m in masters if m is not None], hist, events


@pytest.mark.clause("BKD-ENG-001", "BKD-ENG-002", "BKD-SCL-001", "BKD-SCL-002", "BKD-MM-001",
                    "BKD-RED-001")
@pytest.mark.parametrize("mode,kw", [("fp32", {}), ("amp-fp16", {}), ("amp-bf16", {}),
                                     ("fp16-static", {}), ("fp16-noscale", {}), ("pure-fp16", {}),
                                     ("amp-fp16",
                                      {"inject_nonfinite": 0.5, "profile": "megatron"})])
def test_training_on_the_device_backend_is_bitwise_the_reference(emulated: DeviceBackend, mode: str,
                                                                 kw: dict[str, Any]) -> None:
    """Inputs: four training steps in each mode (and amp-fp16 with injected overflows under
    megatron) on the device backend with strict arrays and host-built kernels. Expected:
    parameters, history and scaler events of the NumPy backend. Pass: bitwise equal."""
    ref_params, ref_hist, ref_events = _train("numpy", mode, 4, **kw)
    dev_params, dev_hist, dev_events = _train("cupy-host", mode, 4, **kw)
    for i, (a, b) in enumerate(zip(dev_params, ref_params, strict=True)):
        assert_bits_equal(a, b, f"{mode} parameter {i}")
    assert dev_hist == ref_hist
    assert dev_events == ref_events
    if kw.get("inject_nonfinite"):
        assert any(not applied for _, applied, _, _ in ref_hist), "no step was skipped"


@pytest.mark.clause("BKD-ENG-001")
def test_train_with_report_checkpoint_and_resume_runs_on_the_device_backend(emulated: DeviceBackend,
                                                                            tmp_path: Any) -> None:
    """Inputs: a 6-step amp-fp16 run with injection, stopped at 3 and resumed, on both
    backends. Expected: a report; equal skipped steps and final scale; identical final
    weights. Pass: all."""
    from ampref.training.train import train
    from ampref.training.config import TrainConfig

    finals = {}
    for be in ("numpy", "cupy-host"):
        cfg = TrainConfig(precision="amp-fp16", steps=6, batch=4, context=16, width=32, heads=2,
                          backend=be, checkpoint_every=2, inject_nonfinite=0.3)
        out = tmp_path / be
        train(cfg, out, progress=False, stop_after=3)      # checkpoints hold device state
        summary = train(cfg, out, resume=True, progress=False)
        with np.load(out / "final.npz") as z:
            finals[be] = (summary["skipped"], summary["final_scale"], {k: z[k] for k in z.files})
        assert (out / "report.md").exists()
    assert finals["cupy-host"][:2] == finals["numpy"][:2]
    for k, v in finals["numpy"][2].items():
        assert_bits_equal(finals["cupy-host"][2][k], v, f"final {k}")


@pytest.mark.clause("BKD-IDX-001")
def test_index_gradients_with_repeated_indices_match_the_reference_on_the_host(
        emulated: DeviceBackend) -> None:
    """Inputs: bf16 values indexed with repeated indices, times 3, summed, on both
    backends. Expected: identical gradients. Pass: bitwise equal."""
    from ampref import functional as F
    from ampref import tensor

    rng = np.random.default_rng(6)
    values = rng.standard_normal((7, 5)).astype(np.float32)
    idx = np.array([3, 3, 1, 6, 3, 0, 1])  # repeats: float64 accumulation in index order
    grads = []
    for be in ("numpy", "cupy-host"):
        x = tensor(values, "bfloat16", requires_grad=True, backend=be)
        F.sum(F.mul(F.index(x, idx if be == "numpy" else emulated.asarray(idx)), 3.0)).backward()
        grads.append(x.backend.to_numpy(x.grad))
    assert_bits_equal(grads[1], grads[0], "index gradient")


# -------------------------------------------------------------------------- on a GPU
def _cupy_backend() -> Any:
    pytest.importorskip("cupy")
    if not backends.available("cupy"):
        pytest.skip("no CUDA device")
    return backends.get("cupy")


@pytest.mark.clause("BKD-QNT-001", "BKD-QNT-002")
@pytest.mark.parametrize("name", list(FORMATS))
def test_gpu_quantize_matches_reference_bitwise(name: str) -> None:
    """Inputs (GPU only): 200,000 float32 inputs and their float64 widenings, every format,
    mode and saturate flag. Expected: the CUDA kernels equal ampref.quantize. Pass: bitwise
    equal."""
    be = _cupy_backend()
    x32 = _inputs32(200000, 4)
    for rnd in RoundingMode:
        seed = 99 if rnd is RoundingMode.STOCHASTIC else None
        for sat in (False, True):
            for x in (x32, x32.astype(np.float64)):
                want = quantize(x, name, rnd.value, saturate=sat, seed=seed)
                got = be.to_numpy(be.quantize(be.asarray(x), name, rnd.value, saturate=sat,
                                              seed=seed))
                assert_bits_equal(got, want, f"GPU {name} {rnd.value} saturate={sat} {x.dtype}")


@pytest.mark.clause("BKD-QNT-002", "FMT-SR-001")
def test_gpu_stochastic_rounding_flips_exactly_at_each_elements_word() -> None:
    """As the host-build test above, on the GPU: 300 elements per format built from
    their own seed-2024 words. Expected: lo, hi, lo (exact). Pass: bitwise equal."""
    be = _cupy_backend()
    for name in ("float16", "bfloat16", "float8_e4m3fn", "float4_e2m1fn"):
        fmt = FORMATS[name]
        x, want = sr_cases.seeded_cases(fmt, [oracle.sr_bits(2024, i)
                                              for i in range(300)])
        got = be.to_numpy(be.quantize(be.asarray(x), name, "stochastic", seed=2024))
        want = np.where(want == 0, 0.0, want) if not fmt.has_negative_zero else want
        assert_bits_equal(got, want, f"GPU {name} stochastic at the word")


def _mm_inputs(rng: np.random.Generator, M: int, K: int, N: int, fmt: str,
               spread: int) -> tuple[Any, Any]:
    a = quantize((rng.standard_normal((M, K)) * np.exp2(rng.integers(-spread, spread + 1, (M, K))))
                 .astype(np.float32), fmt)
    b = quantize((rng.standard_normal((K, N)) * np.exp2(rng.integers(-spread, spread + 1, (K, N))))
                 .astype(np.float32), fmt)
    return a, b


@pytest.mark.clause("BKD-MM-003", "BKD-BF16-001")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
@pytest.mark.parametrize("K", [16, 48, 100])
def test_gpu_tensor_core_chain_is_predicted_bit_for_bit_by_the_h100_model(fmt: str, K: int) -> None:
    """Inputs (GPU only): 37xKx29 fp16/bf16 GEMMs, K = 16, 48, 100, exponent spreads 0, 6,
    14, through the WMMA chain kernel. Expected: the tensorcore:h100 model. Pass: bitwise
    equal."""
    from ampref.accumulation.models import matmul as model_matmul

    be = _cupy_backend()
    rng = np.random.default_rng(K)
    for spread in (0, 6, 14):
        a, b = _mm_inputs(rng, 37, K, 29, fmt, spread)
        want = model_matmul(a, b, input_format=fmt, accumulation="tensorcore:h100")
        got = be.to_numpy(be.matmul(be.asarray(a), be.asarray(b), "tensorcore:h100", fmt))
        assert_bits_equal(got, np.asarray(want, np.float32), f"{fmt} K={K} spread 2^{spread}")


@pytest.mark.clause("BKD-MM-002")
@pytest.mark.parametrize("fmt", ["float16", "bfloat16"])
def test_gpu_cublas_gemm_ex_lies_within_the_stated_bound(fmt: str) -> None:
    """Inputs (GPU only): cublasGemmEx fp16/bf16 GEMMs 64x256x48 and 128x4096x96. Expected:
    |result - exact| <= 2 gamma_K |A||B| + one ulp. Pass: every element within."""
    from ampref.accumulation.certified import matmul_f32

    be = _cupy_backend()
    rng = np.random.default_rng(5)
    for M, K, N in ((64, 256, 48), (128, 4096, 96)):
        a, b = _mm_inputs(rng, M, K, N, fmt, 4)
        exact = matmul_f32(a, b)
        got = be.to_numpy(be.matmul(be.asarray(a), be.asarray(b), "cublas", fmt))
        u = 2.0**-23
        gamma = K * u / (1 - K * u)
        bound = 2 * gamma * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)) \
            + np.spacing(np.abs(exact)).astype(np.float64)
        err = np.abs(got.astype(np.float64) - exact.astype(np.float64))
        worst = float((err / bound).max())
        assert (err <= bound).all(), f"max error/bound {worst:.3g} at {M}x{K}x{N}"


@pytest.mark.clause("BKD-ENG-002")
@pytest.mark.parametrize("mode", ["fp32", "amp-fp16", "amp-bf16"])
def test_gpu_training_is_bitwise_the_reference(mode: str) -> None:
    """Inputs (GPU only): three training steps in fp32, amp-fp16 and amp-bf16 on the CuPy
    backend. Expected: the NumPy backend's parameters, history and events. Pass: bitwise
    equal."""
    _cupy_backend()
    ref_params, ref_hist, ref_events = _train("numpy", mode, 3)
    dev_params, dev_hist, dev_events = _train("cupy", mode, 3)
    for i, (a, b) in enumerate(zip(dev_params, ref_params, strict=True)):
        assert_bits_equal(a, b, f"GPU {mode} parameter {i}")
    assert dev_hist == ref_hist and dev_events == ref_events


@pytest.mark.clause("ACC-REG-001")
def test_every_registry_model_runs_on_the_backends_its_row_names(emulated: DeviceBackend) -> None:
    """Input: one representative name per registry row (a GPU filled in), fp16 operands,
    through the NumPy backend and the device backend on the host (strict arrays).
    Expected: each backend gives the host reference's bits for every row that lists it
    or that the host reference computes; 'cublas' (the real call, device only) is refused
    by the NumPy backend with a message naming the GPU backend. Pass: as stated."""
    from ampref.accumulation import models
    from ampref.accumulation.registry import MODEL_ROWS

    rng = np.random.default_rng(3)
    a = quantize(rng.standard_normal((4, 40)).astype(np.float32), "float16")
    b = quantize(rng.standard_normal((40, 3)).astype(np.float32), "float16")
    names = {r.name: r.name.replace("<gpu>", "h100").replace("[:fast-accum]", "")
             .replace("[:tf32]", "").replace("[:split-k=<S>]", "") for r in MODEL_ROWS}
    numpy_be = backends.get("numpy")
    for row in MODEL_ROWS:
        name = names[row.name]
        if name == "cublas":
            with pytest.raises(ValueError, match="GPU backend"):
                numpy_be.matmul(a, b, name, get_format("float16"))
            continue
        want = models.matmul(a, b, input_format="float16", accumulation=name)
        for be in (numpy_be, emulated):
            got = be.to_numpy(be.matmul(be.asarray(a), be.asarray(b), name,
                                        get_format("float16")))
            assert_bits_equal(np.asarray(got, np.float32), np.asarray(want, np.float32),
                              f"{name} on {be.name}")


@pytest.mark.clause("BKD-QNT-002")
def test_quantize_start_offsets_the_stochastic_words_and_refuses_bad_values(
        emulated: DeviceBackend) -> None:
    """Inputs: 64 float32 values rounded stochastically (seed 9) as one array, and as the
    pieces [0, 40) and [40, 64) with start=0 and start=40; then start = -1, True, 2.5.
    Expected: the pieces joined equal the whole array bit for bit; each bad start raises
    ValueError naming it. Pass: both."""
    x = (np.arange(64, dtype=np.float32) * np.float32(1.0009765625)) + np.float32(1 / 3)
    dx = strictxp.asarray(x)
    whole = strictxp.asnumpy(emulated.quantize(dx, "bf16", "stochastic", seed=9))
    parts = [strictxp.asnumpy(emulated.quantize(strictxp.asarray(x[a:b]), "bf16",
                                                 "stochastic", seed=9, start=a))
             for a, b in ((0, 40), (40, 64))]
    assert_bits_equal(np.concatenate(parts), whole, "pieces with start vs whole")
    bad_starts: tuple[Any, ...] = (-1, True, 2.5)  # deliberately outside the int type
    for bad in bad_starts:
        with pytest.raises(ValueError, match="start must be an int >= 0"):
            emulated.quantize(dx, "bf16", "stochastic", seed=9, start=bad)


@pytest.mark.clause("BKD-SCL-001", "SCL-OBJ-003")
@pytest.mark.parametrize("host_found", [False, True])
def test_an_overflow_found_on_the_host_joins_the_device_row_of_the_same_step(
        emulated: DeviceBackend, host_found: bool) -> None:
    """Inputs: a torch-profile scaler at 65536; optimizer "a"'s finite gradients
    unscaled on the device (strict stand-in, host-built kernels), optimizer "b"'s
    gradient unscaled on the host, with an inf planted or not; then update(). Expected:
    as a scaler that unscales both on the host: with the inf, the step is skipped and
    the scale backs off to 32768 (SCL-OBJ-003: one backoff per step); without, the
    step applies and the scale stays. Pass: update()'s answer and the scale's bits."""
    grads = np.array([1.0, -2.0, 0.5], np.float32)
    other = np.array([3.0, np.inf if host_found else 4.0], np.float32)
    dev, ref = LossScaler(init_scale=65536.0), LossScaler(init_scale=65536.0)
    dev.unscale_on_device([emulated.asarray(grads.copy())], emulated, optimizer="a")
    dev.unscale(other.copy(), optimizer="b")
    ref.unscale(grads.copy(), optimizer="a")
    ref.unscale(other.copy(), optimizer="b")
    applied, want = dev.update(), ref.update()
    assert applied == want == (not host_found)
    assert float(dev.scale).hex() == float(ref.scale).hex() == float(
        32768.0 if host_found else 65536.0).hex()
