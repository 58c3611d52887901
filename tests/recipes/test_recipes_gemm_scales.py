"""NVFP4 GEMMs with every combination of global scales on the two operands (row-scaled,
per-tensor, none), square and non-square, against a rational oracle (REC-GEM-002) and,
on a block-scaled GPU model, against the same model without global scales times alpha."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from ampref import recipes
from ampref.formats.table import get_format
from ampref.testing import assert_bitwise_equal
from oracle import round_value

KINDS: dict[str, tuple[str, dict[str, Any]]] = {
    "row": ("te", {"row_scaled": True}), "tensor": ("te", {}),
    "none": ("torchao", {"per_tensor_scale": False})}


def _operand(rows: int, kind: str, seed: int) -> Any:
    profile, options = KINDS[kind]
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, 32)) * 2.0 ** rng.integers(-4, 4, (rows, 1))).astype(
        np.float32)
    return recipes.quantize(x, "nvfp4", profile=profile, **options)


def _alpha(q: Any, i: int) -> Fraction:
    g = q.global_scale
    if g is None:
        return Fraction(1)
    return Fraction(float(np.asarray(g, np.float32).reshape(-1)[i if np.ndim(g) else 0]))


def _oracle(qa: Any, qb: Any) -> np.ndarray:
    """fl32(fl32(exact dot of element x block scale) x fl32(g_a g_b))."""
    da = replace(qa, global_scale=None).values.astype(np.float64)
    db = replace(qb, global_scale=None).values.astype(np.float64)
    f32 = get_format("float32")
    out = np.empty((da.shape[0], db.shape[0]), np.float32)
    for i in range(da.shape[0]):
        for j in range(db.shape[0]):
            dot = sum((Fraction(float(a)) * Fraction(float(b)) for a, b in zip(da[i], db[j],
                                                                             strict=True)),
                      Fraction(0))
            alpha = round_value(_alpha(qa, i) * _alpha(qb, j), f32)
            out[i, j] = np.float32(float(round_value(
                Fraction(float(round_value(dot, f32))) * Fraction(float(alpha)), f32)))
    return out


@pytest.mark.clause("REC-GEM-002")
@pytest.mark.parametrize("ka", sorted(KINDS))
@pytest.mark.parametrize("kb", sorted(KINDS))
@pytest.mark.parametrize("shape", [(5, 5), (4, 7)], ids=["square", "wide"])
def test_global_scales_of_every_combination_match_the_rational_oracle(
        ka: str, kb: str, shape: tuple[int, int]) -> None:
    """Inputs: every pair of operand kinds (global scale none, scalar, per row) in square
    and wide GEMMs. Expected: the rational oracle's decode-accumulate-times-alpha result.
    Pass: bitwise equal."""
    qa, qb = _operand(shape[0], ka, 1), _operand(shape[1], kb, 2)
    got = recipes.matmul(qa, qb)
    assert got.shape == shape
    assert_bitwise_equal(got, _oracle(qa, qb), msg=f"A {ka}, B {kb}: ")


@pytest.mark.clause("REC-GEM-002", "REC-GEM-003")
@pytest.mark.parametrize("ka", sorted(KINDS))
@pytest.mark.parametrize("kb", sorted(KINDS))
def test_block_scaled_gpus_apply_the_same_alpha(ka: str, kb: str) -> None:
    """Inputs: every pair of operand kinds under tensorcore:b200, with and without global
    scales. Expected: the scaled result equals the unscaled one times alpha (outer product
    of the global scales) in float32. Pass: bitwise equal."""
    qa, qb = _operand(6, ka, 3), _operand(6, kb, 4)
    got = recipes.matmul(qa, qb, accumulation="tensorcore:b200")
    bare = recipes.matmul(replace(qa, global_scale=None), replace(qb, global_scale=None),
                          accumulation="tensorcore:b200")
    ga = np.float32(1) if qa.global_scale is None else np.asarray(qa.global_scale, np.float32)
    gb = np.float32(1) if qb.global_scale is None else np.asarray(qb.global_scale, np.float32)
    alpha = (ga.reshape(-1, 1) if np.ndim(ga) else ga) * (gb.reshape(1, -1) if np.ndim(gb)
                                                          else gb)
    assert_bitwise_equal(got, (bare * np.asarray(alpha, np.float32)).astype(np.float32),
                         msg=f"A {ka}, B {kb}: ")
