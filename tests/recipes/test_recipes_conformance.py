"""ampref's ``te-reference`` and ``torchao`` profiles against the recorded outputs of
Transformer Engine's pure-PyTorch references and of torchao 0.18, bitwise: element codes,
scale codes, scales (tests/data/recipe_vectors.npz, from
scripts/record_recipe_vectors.py). When torchao is installed, the torchao cases also run
live."""

from __future__ import annotations

from functools import cache
from typing import Any

import numpy as np
import pytest

from ampref import decode, recipes
from paths import DATA as RECORDED

DATA = RECORDED / "recipe_vectors.npz"


@cache
def _vectors() -> dict[str, np.ndarray]:
    with np.load(DATA) as z:
        return {k: z[k] for k in z.files}


def _names() -> list[str]:
    return sorted(k.split("/", 1)[1] for k in _vectors() if k.startswith("input/"))


def _bits_equal(got: np.ndarray, want: np.ndarray, what: str) -> None:
    g, w = np.asarray(got), np.asarray(want)
    assert g.shape == w.shape, f"{what}: shape {g.shape} != {w.shape}"
    if g.dtype.kind == "f":  # bitwise, except that every NaN is one NaN (REC-ELM-002)
        g, w = (np.where(np.isnan(a), np.float32(np.nan), a).astype(np.float32).view(np.uint32)
                for a in (g, w))
    bad = np.flatnonzero(g.reshape(-1) != w.reshape(-1))
    assert bad.size == 0, (f"{what}: {bad.size} of {g.size} differ, first at {bad[:4]}: got "
                           f"{[hex(int(v)) for v in g.reshape(-1)[bad[:4]]]}, recorded "
                           f"{[hex(int(v)) for v in w.reshape(-1)[bad[:4]]]}")


#: NaN codes of the FP8 formats (either sign): torch keeps the sign (and torchao's FP4/FP6
#: encoder the payload) of whatever float32 NaN reaches the cast; ampref emits the
#: positive canonical NaN (REC-ELM-002), so NaN codes compare as NaN
_NAN_CODES = {"float8_e4m3fn": (0x7F, 0xFF), "float8_e5m2": (0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF)}


def _canon(codes: np.ndarray, fmt: str) -> np.ndarray:
    c = np.asarray(codes, np.uint8)
    return np.where(np.isin(c, _NAN_CODES[fmt]), np.uint8(0x7F), c) if fmt in _NAN_CODES else c


def _nan_driven(x: np.ndarray, ref_scale_codes: np.ndarray, scale_format: str,
                ref_global: np.ndarray | None = None) -> np.ndarray:
    """Elements whose FP4/FP6 code torchao derives from a NaN float32: a NaN input, a
    block whose *recorded* scale is NaN, or a NaN recorded per-tensor scale. Its encoder
    maps NaN bits to a payload-dependent code (REC-ELM-002). Derived from the input and
    the reference's recording only, never from the output under test; everything else
    compares bitwise."""
    block = x.shape[-1] // ref_scale_codes.shape[-1]
    scale_nan = np.isnan(decode(ref_scale_codes, scale_format).astype(np.float64))
    v = np.isnan(x) | np.repeat(scale_nan, block, axis=-1)
    if ref_global is not None and np.isnan(np.asarray(ref_global, np.float64)).any():
        v |= True
    return np.asarray(v)


def _cases(prefix: str) -> list[str]:
    return sorted({k.rsplit("/", 1)[0] for k in _vectors() if k.startswith(prefix)
                   and not k.endswith("/global_scale")})


@pytest.mark.clause("REC-NV4-001", "REC-NV4-002", "REC-NV4-003", "REC-ELM-001", "REC-AMX-001")
@pytest.mark.parametrize("key", _cases("te-reference/nvfp4/"))
def test_nvfp4_matches_te_python_reference_bitwise(key: str) -> None:
    """Inputs: each recorded input (mixed, midpoints, zeros, -0, subnormal, huge, one big,
    NaN, inf) quantized to NVFP4 under te-reference with the recorded tile. Expected: the
    element and E4M3 scale codes TE's Python reference produced
    (tests/data/recipe_vectors.npz). Pass: bitwise equal (scale NaN codes canonicalised)."""
    v = _vectors()
    _, _, tile, name = key.split("/")
    r, c = map(int, tile.split("x"))
    q = recipes.quantize(v[f"input/{name}"], "nvfp4", profile="te-reference", tile=(r, c))
    _bits_equal(q.codes, v[f"{key}/codes"], f"{key} codes")
    e4m3 = "float8_e4m3fn"
    _bits_equal(_canon(q.scale_codes, e4m3), _canon(v[f"{key}/scale_codes"], e4m3),
                f"{key} scale codes")


@pytest.mark.clause("REC-NV4-004", "REC-ELM-002")
@pytest.mark.parametrize("key", _cases("te-reference/fos/"))
def test_nvfp4_4over6_matches_te_python_reference_bitwise(key: str) -> None:
    """Inputs: the recorded inputs with four_over_six=True under te-reference. Expected:
    TE's recorded scale and element codes. Pass: bitwise equal."""
    v = _vectors()
    _, _, tile, name = key.split("/")
    r, c = map(int, tile.split("x"))
    q = recipes.quantize(v[f"input/{name}"], "nvfp4", profile="te-reference", tile=(r, c),
                         four_over_six=True)
    e4m3 = "float8_e4m3fn"
    _bits_equal(_canon(q.scale_codes, e4m3), _canon(v[f"{key}/scale_codes"], e4m3),
                f"{key} scale codes")
    _bits_equal(q.codes, v[f"{key}/codes"], f"{key} codes")


@pytest.mark.clause("REC-SCL-002", "REC-TIL-001")
@pytest.mark.parametrize("key", _cases("te-reference/fp8_block/"))
def test_fp8_block_matches_te_python_reference_bitwise(key: str) -> None:
    """Inputs: the recorded inputs as FP8 1x128/128x128 blocks with and without power-of-
    two scales. Expected: TE's recorded codes and scales. Pass: bitwise equal."""
    v = _vectors()
    _, _, tile, pow2, name = key.split("/")
    r = int(tile.split("x")[0])
    q = recipes.quantize(v[f"input/{name}"], "fp8_block", profile="te-reference",
                         tile=(r, 128), pow2=pow2 == "pow2=1")
    _bits_equal(_canon(q.codes, q.element), _canon(v[f"{key}/codes"], q.element), f"{key} codes")
    _bits_equal(q.scales, v[f"{key}/scales"], f"{key} scales")


@pytest.mark.clause("REC-SCL-002", "REC-SCL-004")
@pytest.mark.parametrize("key", _cases("te-reference/fp8_current/"))
def test_fp8_current_matches_te_python_reference_bitwise(key: str) -> None:
    """Inputs: the recorded inputs with per-tensor current scaling, with and without pow2.
    Expected: TE's recorded codes and scale_inv. Pass: bitwise equal."""
    v = _vectors()
    _, _, pow2, name = key.split("/")
    q = recipes.quantize(v[f"input/{name}"], "fp8_current", profile="te-reference",
                         pow2=pow2 == "pow2=1")
    _bits_equal(_canon(q.codes, q.element), _canon(v[f"{key}/codes"], q.element), f"{key} codes")
    _bits_equal(q.scales, v[f"{key}/scales"], f"{key} scale_inv")


@pytest.mark.clause("REC-MX-003", "REC-ELM-001")
@pytest.mark.parametrize("key", _cases("torchao/mx"))
def test_mx_matches_torchao_bitwise(key: str) -> None:
    """Inputs: the recorded inputs under every MX recipe and torchao scale rule. Expected:
    torchao's recorded scale codes; its element codes except where NaN decides them (mask
    from the input and the recorded scales), which must be NaN here too. Pass: bitwise
    equal and the NaN check."""
    v = _vectors()
    _, rec, mode, name = key.split("/")
    x = v[f"input/{name}"]
    q = recipes.quantize(x, rec, profile="torchao", scale_rule=mode)
    _bits_equal(q.scale_codes, v[f"{key}/scale_codes"], f"{key} scale codes")
    keep = ~_nan_driven(x, v[f"{key}/scale_codes"], "float8_e8m0fnu")
    assert np.isnan(q.values[~keep]).all(), f"{key}: a NaN-driven element is not NaN here"
    _bits_equal(_canon(q.codes, q.element)[keep], _canon(v[f"{key}/codes"], q.element)[keep],
                f"{key} codes")


@pytest.mark.clause("REC-NV4-001", "REC-NV4-002", "REC-NV4-003")
@pytest.mark.parametrize("key", _cases("torchao/nvfp4/"))
def test_nvfp4_matches_torchao_bitwise(key: str) -> None:
    """Inputs: the recorded inputs as NVFP4 under torchao, with and without the per-tensor
    scale. Expected: torchao's recorded scale codes, element codes (NaN-driven ones masked
    from the recording and required NaN here) and per-tensor scale. Pass: bitwise equal."""
    v = _vectors()
    _, _, level, name = key.split("/")
    two = level == "two_level=1"
    x = v[f"input/{name}"]
    q = recipes.quantize(x, "nvfp4", profile="torchao", per_tensor_scale=two)
    e4m3 = "float8_e4m3fn"
    _bits_equal(_canon(q.scale_codes, e4m3), _canon(v[f"{key}/scale_codes"], e4m3),
                f"{key} scale codes")
    keep = ~_nan_driven(x, v[f"{key}/scale_codes"], e4m3,
                        v[f"{key}/global_scale"] if two else None)
    assert np.isnan(q.values[~keep]).all(), f"{key}: a NaN-driven element is not NaN here"
    _bits_equal(q.codes[keep], v[f"{key}/codes"][keep], f"{key} codes")
    if two:
        _bits_equal(q.global_scale, v[f"{key}/global_scale"], f"{key} per-tensor scale")


@pytest.mark.clause("REC-SCL-003", "REC-TIL-001")
@pytest.mark.parametrize("key", _cases("torchao/fp8_block/"))
def test_fp8_block_matches_torchao_bitwise(key: str) -> None:
    """Inputs: the recorded inputs as torchao FP8 blocks (1x128, 128x128). Expected:
    torchao's recorded codes and scales. Pass: bitwise equal."""
    v = _vectors()
    _, _, tile, name = key.split("/")
    q = recipes.quantize(v[f"input/{name}"], "fp8_block", profile="torchao",
                         tile=(int(tile.split("x")[0]), 128))
    _bits_equal(q.codes, v[f"{key}/codes"], f"{key} codes")
    _bits_equal(q.scales, v[f"{key}/scales"], f"{key} scales")


@pytest.mark.clause("REC-SCL-003")
@pytest.mark.parametrize("key", _cases("torchao/fp8_current/"))
def test_fp8_current_matches_torchao_bitwise(key: str) -> None:
    """Inputs: the recorded inputs with torchao's per-tensor scaling, with and without
    pow2. Expected: the recorded codes and 1/scale. Pass: bitwise equal."""
    v = _vectors()
    _, _, pow2, name = key.split("/")
    q = recipes.quantize(v[f"input/{name}"], "fp8_current", profile="torchao",
                         pow2=pow2 == "pow2=1")
    _bits_equal(_canon(q.codes, q.element), _canon(v[f"{key}/codes"], q.element), f"{key} codes")
    with np.errstate(divide="ignore"):
        _bits_equal(np.float32(1) / v[f"{key}/scale"], q.scales, f"{key} scale_inv")


def _live(name: str, rec: str, mode: str) -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.prototype.mx_formats import mx_tensor
    from torchao.prototype.mx_formats.config import ScaleCalculationMode
    x = _vectors()[f"input/{name}"]
    dt = {"mxfp8_e4m3": torch.float8_e4m3fn, "mxfp8_e5m2": torch.float8_e5m2}[rec]
    s, d = mx_tensor.to_mx(torch.from_numpy(x), dt, 32, getattr(ScaleCalculationMode,
                                                                 mode.upper()))
    return (s.view(torch.uint8).numpy(), d.view(torch.uint8).numpy())


@pytest.mark.clause("REC-MX-003")
@pytest.mark.parametrize("mode", ["floor", "rceil"])
def test_mx_matches_live_torchao_when_installed(mode: str) -> None:
    """Inputs: the recorded inputs through the installed torchao's to_mx (floor and rceil)
    and ampref. Expected: equal scale and element codes. Pass: bitwise equal."""
    for name in _names():
        s, d = _live(name, "mxfp8_e4m3", mode)
        q = recipes.quantize(_vectors()[f"input/{name}"], "mxfp8_e4m3", profile="torchao",
                             scale_rule=mode)
        _bits_equal(q.scale_codes, s, f"live {name} scale codes")
        _bits_equal(q.codes, d, f"live {name} codes")


@pytest.mark.clause("REC-NV4-001", "REC-NV4-002", "REC-NV4-003")
def test_nvfp4_matches_live_torchao_when_installed() -> None:
    """Inputs: six recorded inputs through the installed torchao's nvfp4_quantize with its
    per-tensor scale. Expected: ampref's scale codes, unpacked element codes and per-tensor
    scale equal torchao's. Pass: bitwise equal."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("torchao")
    from torchao.prototype.mx_formats import nvfp4_tensor
    for name in ("mixed", "midpoints", "subnormal", "huge", "one_big", "negzero"):
        x = _vectors()[f"input/{name}"]
        t = torch.from_numpy(x)
        pts = nvfp4_tensor.per_tensor_amax_to_scale(torch.max(torch.abs(t)))
        s, d = nvfp4_tensor.nvfp4_quantize(t, 16, pts)
        packed = d.view(torch.uint8).numpy()
        codes = np.empty((packed.shape[0], packed.shape[1] * 2), np.uint8)
        codes[:, ::2], codes[:, 1::2] = packed & 0xF, packed >> 4
        q = recipes.quantize(x, "nvfp4", profile="torchao")
        _bits_equal(q.scale_codes, s.view(torch.uint8).numpy(), f"live {name} scale codes")
        _bits_equal(q.codes, codes, f"live {name} codes")
        _bits_equal(q.global_scale, pts.numpy(), f"live {name} per-tensor scale")
