"""The frameworks' data-parallel semantics as data. Oracles: the profile table of
specs/distributed.md (read here, so data and spec cannot drift), torch's own predivide
function (live, when torch is installed) and the values the spec derives by hand."""

from __future__ import annotations

import re

import pytest

from ampref.distributed import DEFAULT_DP, DP_PROFILES, DataParallel, fsdp_predivide, get_dp
from ampref.scaling.profiles import PROFILES
from paths import ROOT

SPEC = (ROOT / "specs" / "distributed.md").read_text(encoding="utf-8")
ROWS = re.findall(r"^\| (DPL-PRF-\d{3}) \| (\S+) \| (\w+) \| (\w+), (\w+) \| (\w+) \| (\w+) \| "
                  r"(\w+) \|$", SPEC, re.M)


@pytest.mark.clause("DPL-PRF-000", "DPL-PRF-001", "DPL-PRF-002", "DPL-PRF-003", "DPL-PRF-004",
                    "DPL-PRF-005", "DPL-PRF-006")
def test_every_profile_row_is_the_spec_tables_row() -> None:
    """Inputs: the data-parallel rows and the spec table's rows (specs/distributed.md).
    Expected: the same names; layout, divide, divide_op, check, detect and agree equal per
    row; every row names a source. Pass: all."""
    assert sorted(r[1] for r in ROWS) == sorted(DP_PROFILES)
    for _, name, layout, divide, op, check, detect, agree in ROWS:
        p = DP_PROFILES[name]
        assert (p.layout, p.divide, p.divide_op, p.check, p.detect, p.agree) == \
            (layout, divide, op, check, detect, agree), name
        assert p.source, f"{name} names no framework source"


@pytest.mark.clause("DPL-PRF-000")
def test_every_loss_scale_profile_trains_with_a_data_parallel_row() -> None:
    """Inputs: DEFAULT_DP and the scaler profiles. Expected: one data-parallel row per
    scaler profile, each a known row. Pass: both."""
    assert sorted(DEFAULT_DP) == sorted(PROFILES)
    assert all(v in DP_PROFILES for v in DEFAULT_DP.values())


@pytest.mark.clause("DPL-DIV-001")
@pytest.mark.parametrize("ranks,pre", [(1, 1), (2, 2), (3, 2), (4, 2), (8, 4), (16, 4),
                                        (32, 8), (6, 4), (12, 4)])
def test_the_fsdp_predivide_factor_is_torchs_loop(ranks: int, pre: int) -> None:
    """Inputs: ranks 1, 2, 3, 4, 8, 16, 32, 6, 12. Expected: pre-divide factors 1, 2, 2, 2,
    4, 4, 8, 4, 4 (torch's loop worked by hand). Pass: equal."""
    assert fsdp_predivide(ranks) == pre


@pytest.mark.clause("DPL-DIV-001")
def test_the_fsdp_predivide_factor_equals_torchs_function_live() -> None:
    """Inputs: ranks 1..128 through torch's DefaultState._get_gradient_predivide_factor.
    Expected: ampref's factor equal. Pass: equal for all."""
    pytest.importorskip("torch")
    hooks = pytest.importorskip("torch.distributed.algorithms._comm_hooks.default_hooks")
    for n in range(1, 129):
        assert fsdp_predivide(n) == hooks.DefaultState._get_gradient_predivide_factor(n), n


@pytest.mark.clause("DPL-ERR-001")
@pytest.mark.parametrize("field,value", [("layout", "ring"), ("divide", "avg"),
                                         ("divide_op", "shift"), ("check", "half"),
                                         ("detect", "norm"), ("agree", "min"),
                                         ("order", "butterfly")])
def test_a_row_with_a_field_outside_its_choices_is_refused(field: str, value: str) -> None:
    """Inputs: a DataParallel row with one field outside its choices (seven cases).
    Expected: ValueError naming the field and the value. Pass: both named."""
    kw = {"name": "x", "layout": "flat", "divide": "pre", "check": "full", "agree": "none"}
    kw[field] = value
    with pytest.raises(ValueError) as e:
        DataParallel(**kw)  # type: ignore[arg-type]
    assert field in str(e.value) and repr(value) in str(e.value)


@pytest.mark.clause("DPL-ERR-001")
def test_bucket_caps_must_be_positive_and_names_must_be_known() -> None:
    """Inputs: empty bucket caps, a cap of 0 bytes, then caps of 1 byte (the smallest
    positive count); get_dp('horovod'). Expected: ValueError naming bucket_caps for the
    first two, the 1-byte row accepted; ValueError naming horovod and the known rows.
    Pass: all."""
    kw = dict(name="x", layout="buckets", divide="pre", check="full", agree="none")
    for caps in ((), (0,), (4, 0)):
        with pytest.raises(ValueError, match="bucket_caps"):
            DataParallel(**kw, bucket_caps=caps)  # type: ignore[arg-type]
    assert DataParallel(**kw, bucket_caps=(1, 1)).bucket_caps == (1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError) as e:
        get_dp("horovod")
    assert "horovod" in str(e.value) and "torch-fsdp1" in str(e.value)
