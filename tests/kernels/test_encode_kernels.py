"""The compiled encode kernel against the NumPy specification, bit for bit: every float32
pattern for float16 and bfloat16 under nearest-even, strided and random sweeps of every
format x mode x saturate x subnormals from float32 and float64, and hypothesis hard
cases; plus the switch that selects the implementation (FMT-IMP-002)."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ampref
from ampref.formats.cast import value_table
from ampref.formats.table import FORMATS, Format
from ampref.kernels import encode as spec
from ampref.kernels.params import MODE_NAMES, STOCHASTIC
from ampref.testing import hard_cases

numba_kernels = pytest.importorskip("ampref.kernels.encode_numba")

KERNEL_FORMATS = [f for f in FORMATS.values() if f.kernel]
_NO_TABLE = np.empty(0, np.float32)


def _table(fmt: Format) -> npt.NDArray[np.float32]:
    return value_table(fmt) if fmt.bits <= 16 else _NO_TABLE


def _first_difference(a: npt.NDArray[Any], b: npt.NDArray[Any], x: npt.NDArray[Any]) -> str:
    i = int(np.flatnonzero(a.reshape(-1) != b.reshape(-1))[0])
    word = x.reshape(-1).view(np.uint32 if x.dtype == np.float32 else np.uint64)[i]
    return (f"{int(np.sum(a != b))} codes differ; first at input {int(word):#x}: "
            f"specification {int(a.reshape(-1)[i]):#x}, compiled {int(b.reshape(-1)[i]):#x}")


def _assert_same(x: npt.NDArray[Any], fmt: Format, rnd: int, sat: bool, sub: bool,
                 seed: int = 0x5EED, words: Any = None) -> int:
    """Codes, NaN masks and quantized values through both implementations."""
    seed_arg = seed if rnd == STOCHASTIC and words is None else None
    a = spec.encode_bits(x, fmt.spec, rnd, sat, sub, seed_arg, words)
    b = numba_kernels.encode_bits(x, fmt.spec, rnd, sat, sub, seed_arg, words)
    where = f"{fmt.name} {MODE_NAMES[rnd]} saturate={sat} subnormals={sub} from {x.dtype}"
    assert np.array_equal(a[0], b[0]), f"{where}: {_first_difference(a[0], b[0], x)}"
    if fmt.has_nan:  # only formats without a NaN code report which inputs were NaN
        assert a[1] is None and b[1] is None, f"{where}: a NaN mask for a format with NaN"
    else:
        assert a[1] is not None and b[1] is not None and np.array_equal(a[1], b[1]), \
            f"{where}: NaN masks differ"
    qa = spec.quantize_bits(x, fmt.spec, rnd, sat, sub, seed_arg, words, _table(fmt))
    qb = numba_kernels.quantize_bits(x, fmt.spec, rnd, sat, sub, seed_arg, words, _table(fmt))
    assert np.array_equal(qa.view(np.uint32), qb.view(np.uint32)), \
        f"{where}: values {_first_difference(qa.view(np.uint32), qb.view(np.uint32), x)}"
    return x.size


@pytest.mark.clause("FMT-IMP-002")
@pytest.mark.parametrize("name", ["float16", "bfloat16"])
def test_every_float32_pattern_encodes_to_the_same_code_in_both_kernels(name: str) -> None:
    """Inputs: all 2^32 float32 bit patterns, fp16 and bf16, nearest-even. Expected: the
    compiled kernel's codes equal the NumPy specification's. Pass: identical arrays."""
    fmt = FORMATS[name]
    checked = 0
    for start in range(0, 1 << 32, 1 << 26):
        x = np.arange(start, start + (1 << 26), dtype=np.uint32).view(np.float32)
        a = spec.encode_bits(x, fmt.spec, 0, False, True, None)[0]
        b = numba_kernels.encode_bits(x, fmt.spec, 0, False, True, None)[0]
        assert np.array_equal(a, b), f"{name}: {_first_difference(a, b, x)}"
        checked += x.size
    assert checked == 1 << 32


def _sweep32() -> npt.NDArray[np.float32]:
    # every 65521st pattern (a prime stride: all exponents, mantissa low bits vary)
    return np.arange(0, 1 << 32, 65521, dtype=np.uint64).astype(np.uint32).view(np.float32)


def _sweep64() -> npt.NDArray[np.float64]:
    rng = np.random.default_rng(20261124)
    words = rng.integers(0, 1 << 63, 30_000, dtype=np.uint64) | (
        rng.integers(0, 2, 30_000, dtype=np.uint64) << np.uint64(63))
    with np.errstate(invalid="ignore"):  # signalling NaNs quieten when widened: still NaN
        widened = _sweep32()[::3].astype(np.float64)  # float32 values, grid midpoints among them
    return np.concatenate([words.view(np.float64), widened])


@pytest.mark.clause("FMT-IMP-002")
@pytest.mark.parametrize("fmt", KERNEL_FORMATS, ids=lambda f: f.name)
def test_strided_sweeps_of_every_mode_and_flag_agree_bit_for_bit(fmt: Format) -> None:
    """Inputs: strided float32 and float64 sweeps through every kernel format, mode,
    saturate and flush flag (more than 2 million checks). Expected: identical codes and NaN
    masks from both kernels. Pass: equal."""
    checked = 0
    for x in (_sweep32(), _sweep64()):
        for rnd in range(len(MODE_NAMES)):
            for sat in (False, True):
                for sub in (True, False):
                    checked += _assert_same(x, fmt, rnd, sat, sub)
    assert checked > 2_000_000


@pytest.mark.clause("FMT-IMP-002", "FMT-SR-001")
def test_caller_supplied_stochastic_words_give_the_same_bits() -> None:
    """Inputs: the float32 sweep with random caller words, fp16, e5m2, e2m1. Expected:
    identical results from both kernels. Pass: equal."""
    x = _sweep32()
    words = np.random.default_rng(4).integers(0, 1 << 32, x.size, dtype=np.uint64)
    for fmt in (FORMATS["float16"], FORMATS["float8_e5m2"], FORMATS["float4_e2m1fn"]):
        _assert_same(x, fmt, STOCHASTIC, False, True, words=words.astype(np.uint32))


@pytest.mark.clause("FMT-IMP-002")
@given(data=st.data())
def test_hard_cases_agree_in_both_kernels(data: st.DataObject) -> None:
    """Inputs: hypothesis hard cases per format, source dtype, mode and flags. Expected:
    identical results from both kernels. Pass: equal."""
    fmt = data.draw(st.sampled_from(KERNEL_FORMATS), label="fmt")
    dtype = data.draw(st.sampled_from([np.float32, np.float64]), label="dtype")
    values = data.draw(st.lists(hard_cases(fmt, dtype=dtype), min_size=1, max_size=40))
    x = np.array(values, dtype=dtype)
    _assert_same(x, fmt, data.draw(st.integers(0, len(MODE_NAMES) - 1), label="rnd"),
                 data.draw(st.booleans(), label="sat"), data.draw(st.booleans(), label="sub"))


@pytest.mark.clause("FMT-IMP-002")
def test_large_arrays_split_across_threads_give_the_bits_of_one_pass() -> None:
    """Inputs: 300,001 values (above the threading threshold) in fp16, e4m3, bf16, every
    mode. Expected: identical to the single-pass specification. Pass: equal."""
    # above the parallel threshold the compiled kernel runs blocks on threads
    x = np.random.default_rng(2).standard_normal(300_001).astype(np.float32) * 1e3
    for fmt in (FORMATS["float16"], FORMATS["float8_e4m3fn"], FORMATS["bfloat16"]):
        for rnd in range(len(MODE_NAMES)):
            _assert_same(x, fmt, rnd, False, True)


@pytest.mark.clause("FMT-IMP-002")
def test_the_public_api_gives_the_same_values_under_either_switch() -> None:
    """Inputs: the sweep through quantize in five formats, toward_negative, saturating,
    with use_kernels('numpy') and ('compiled'). Expected: identical values. Pass: bitwise
    equal."""
    x = _sweep32()[::7]
    for name in ("float16", "float8_e4m3fn", "float6_e2m3fn", "tf32", "float8_e8m0fnu"):
        with ampref.use_kernels("numpy"):
            a = ampref.quantize(x, name, "toward_negative", saturate=True)
        with ampref.use_kernels("compiled"):
            b = ampref.quantize(x, name, "toward_negative", saturate=True)
        assert np.array_equal(a.view(np.uint32), b.view(np.uint32)), name


def test_the_switch_names_the_choices_and_restores_the_previous_one() -> None:
    before = ampref.get_kernels()
    with ampref.use_kernels("numpy"):
        assert ampref.get_kernels() == "numpy"
    assert ampref.get_kernels() == before
    with pytest.raises(ValueError, match="kernels must be one of compiled, numpy, got 'fast'"):
        ampref.set_kernels("fast")
    with pytest.raises(TypeError, match="kernels must be a str"):
        ampref.set_kernels(None)  # type: ignore[arg-type]


@pytest.mark.clause("FMT-IMP-002")
def test_one_use_kernels_object_restores_the_choice_at_every_exit_and_checks_when_made() -> None:
    """Inputs: ``use_kernels("numpy")`` made once, entered in two blocks, once nested in
    itself, and decorating a function called twice; ``use_kernels("fast")``. Expected:
    "numpy" inside every entry and the previous choice after every exit (before, the
    second ``with`` of the object raised AttributeError inside contextlib); a ValueError
    for "fast" when made, before any block. Pass: each read of ``get_kernels``, the
    error."""
    before = ampref.get_kernels()
    ctx = ampref.use_kernels("numpy")
    seen = []
    for _ in range(2):
        with ctx:
            with ctx:
                seen.append(ampref.get_kernels())
            seen.append(ampref.get_kernels())
        seen.append(ampref.get_kernels())
    run = ctx(ampref.get_kernels)
    seen += [run(), ampref.get_kernels(), run()]
    assert seen == ["numpy", "numpy", before] * 2 + ["numpy", before, "numpy"]
    with pytest.raises(ValueError, match="got 'fast'"):
        ampref.use_kernels("fast")


@pytest.mark.clause("FMT-IMP-002")
def test_without_numba_the_default_is_numpy_and_asking_for_compiled_names_numba() -> None:
    """Input: a fresh process where numba cannot be imported (``sys.modules["numba"] =
    None``, which is what ``find_spec`` reports for an uninstalled package too). Expected:
    the default kernels are "numpy"; ``set_kernels("numpy")`` works; ``set_kernels(
    "compiled")`` and ``AMPREF_KERNELS=compiled`` raise a ValueError that names numba.
    Pass: the printed lines and the error text, as stated."""
    code = ("import sys; sys.modules['numba'] = None\n"
            "import ampref\n"
            "print(ampref.get_kernels()); ampref.set_kernels('numpy'); print('numpy ok')\n"
            "try:\n    ampref.set_kernels('compiled')\n"
            "except ValueError as e:\n    print('refused:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[:2] == ["numpy", "numpy ok"], lines
    assert lines[2].startswith("refused: kernels asks for the compiled kernels, but numba is "
                               "not installed"), lines
    env = dict(os.environ, AMPREF_KERNELS="compiled")
    bad = subprocess.run([sys.executable, "-c", "import sys; sys.modules['numba'] = None\n"
                          "import ampref; ampref.get_kernels()"],
                         env=env, capture_output=True, text=True)
    assert bad.returncode != 0 and "but numba is not installed" in bad.stderr, bad.stderr


def test_the_environment_variable_selects_the_kernels_of_a_fresh_process() -> None:
    code = "import ampref; print(ampref.get_kernels())"
    env = dict(os.environ, AMPREF_KERNELS="numpy")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.strip() == "numpy"
    env["AMPREF_KERNELS"] = "jit"
    bad = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert bad.returncode != 0
    assert "AMPREF_KERNELS must be one of compiled, numpy, got 'jit'" in bad.stderr
