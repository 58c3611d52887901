"""``ampref train --ranks N``: the one-rank identity, planted overflows on one rank, exact
resume, the comparison with a one-rank twin, the report, and named errors. Oracles: the
one-rank path of before (bit for bit), the planted (step, rank) pairs, and the frameworks'
agreement rules applied by hand to the recorded per-rank flags."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from ampref.training.config import TrainConfig, TrainError
from ampref.training.corpus import Corpus, load_corpus
from ampref.training.dataparallel import DataParallelStep, dp_summary, weight_gap
from ampref.training.run import Run
from ampref.training.train import compare_dp, train

SMALL = TrainConfig(precision="amp-fp16", steps=8, batch=8, context=16, width=32, heads=2,
                    blocks=1, checkpoint_every=3)


def _final(out: Path) -> dict[str, np.ndarray]:
    with np.load(out / "final.npz") as z:
        return {k: z[k].copy() for k in z.files}


def _same_bits(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32))
                                        for k in a)


@pytest.mark.clause("DPL-TRN-002")
@pytest.mark.parametrize("precision", ["amp-fp16", "fp32"])
def test_the_data_parallel_path_with_one_rank_is_the_one_rank_path_bit_for_bit(
        precision: str) -> None:
    """Inputs: four amp-fp16 and fp32 steps with and without a forced one-rank data-
    parallel step. Expected: equal losses and scales and identical master weights. Pass:
    equal and bitwise equal."""
    cfg = replace(SMALL, precision=precision, steps=4)
    corpus = Corpus(load_corpus(None), cfg.context)
    plain, forced = Run(cfg, corpus), Run(cfg, corpus)
    assert plain.parallel is None
    forced.parallel = DataParallelStep(forced)
    for _ in range(cfg.steps):
        a, b = plain.step(), forced.step()
        assert a["loss"] == b["loss"] and a["scale_after"] == b["scale_after"]
    for x, y in zip(plain.master_weights(), forced.master_weights(), strict=True):
        assert np.array_equal(x.view(np.uint32), y.view(np.uint32))


@pytest.mark.clause("DPL-TRN-001", "DPL-INF-003")
@pytest.mark.parametrize("dp", ["torch-ddp", "torch-fsdp1", "megatron"])
def test_a_planted_overflow_on_one_rank_skips_exactly_that_step(dp: str, tmp_path: Path) -> None:
    """Inputs: four ranks, an overflow planted at step 3 on rank 2, under ddp, fsdp1,
    megatron. Expected: only step 3 skipped, triggered by rank 2; found_inf 1 (ddp,
    megatron) or the flag count (fsdp1); ddp flags every rank, the sharded ones one rank.
    Pass: all."""
    cfg = replace(SMALL, ranks=4, dp=dp, plant=((3, 2),))
    s = train(cfg, tmp_path, progress=False, report=False)
    assert s["skipped"] == [3]
    d = s["data_parallel"]
    assert d["skips"][0]["step"] == 3 and d["skips"][0]["triggered_by"] == [2]
    hist = json.loads((tmp_path / "metrics.json").read_text())["history"]
    flags = hist[3]["ranks"]["flagged"]
    want = {"torch-ddp": 1.0, "torch-fsdp1": float(sum(flags)), "megatron": 1.0}[dp]
    assert hist[3]["ranks"]["found_inf"] == want
    if dp == "torch-ddp":
        assert flags == [1, 1, 1, 1]
    else:
        assert sum(flags) == 1  # one element: one shard
    assert all(r["ranks"]["triggered_by"] == [] for r in hist if r["step"] != 3)


@pytest.mark.clause("DPL-INF-002", "DPL-TRN-001")
def test_two_ranks_planting_at_one_step_are_counted_by_fsdp1_where_they_land(
        tmp_path: Path) -> None:
    """Inputs: fsdp1, four ranks, ranks 0 and 3 planting at step 2. Expected: triggered_by
    [0, 3], found_inf the sum of the flags (>= 1). Pass: both."""
    cfg = replace(SMALL, ranks=4, dp="torch-fsdp1", plant=((2, 0), (2, 3)))
    d = train(cfg, tmp_path, progress=False, report=False)["data_parallel"]
    skip = d["skips"][0]
    assert skip["triggered_by"] == [0, 3]
    assert skip["found_inf"] == sum(skip["flagged"]) >= 1


@pytest.mark.clause("DPL-TRN-001", "DPL-LAY-001")
def test_a_resumed_four_rank_run_equals_the_uninterrupted_one(tmp_path: Path) -> None:
    """Inputs: a four-rank run with a plant, whole and stopped at 5 then resumed. Expected:
    identical final weights. Pass: bitwise equal."""
    cfg = replace(SMALL, ranks=4, plant=((4, 1),))
    train(cfg, tmp_path / "full", progress=False, report=False)
    train(cfg, tmp_path / "cut", progress=False, report=False, stop_after=5)
    train(cfg, tmp_path / "cut", resume=True, progress=False, report=False)
    assert _same_bits(_final(tmp_path / "full"), _final(tmp_path / "cut"))


@pytest.mark.clause("DPL-TRN-003")
def test_the_ranks_change_the_weights_and_the_report_says_by_how_much(tmp_path: Path) -> None:
    """Inputs: ddp and fsdp1 with two ranks and a plant at step 2, compared. Expected: a
    gap to the one-rank twin between 0 and 0.5, step 2 skipped, the report section and
    plot, the comparison table's rows. Pass: all."""
    rows = compare_dp(replace(SMALL, ranks=2, plant=((2, 1),)), ["torch-ddp", "torch-fsdp1"],
                      tmp_path, progress=False, report=True)
    for r in rows:
        gap = r["data_parallel"]["vs_one_rank"]
        assert 0 < gap["max_rel_diff"] < 0.5 and 0 < gap["differ_fraction"] <= 1
        assert r["skipped"] == [2]  # the twin skips the same step: its plant is on rank 0
    text = (tmp_path / "torch-fsdp1" / "report.md").read_text()
    assert "## Data parallelism" in text and "data_parallel.png" in text
    assert (tmp_path / "torch-fsdp1" / "data_parallel.png").read_bytes()[:4] == b"\x89PNG"
    table = (tmp_path / "dp_compare.md").read_text()
    assert "| torch-ddp (2 ranks, float32) | 2: [1] / [0, 1] / 1 |" in table
    assert "| torch-fsdp1 (2 ranks, float32) | 2: [1] / " in table


@pytest.mark.clause("DPL-ERR-001")
@pytest.mark.parametrize("changes,msg", [
    ({"ranks": 0}, "--ranks must be an integer >= 1, got 0"),
    ({"ranks": True}, "--ranks must be an integer >= 1"),
    ({"ranks": 3}, "--batch 8 must be divisible by --ranks 3"),
    ({"dp": "horovod"}, "unknown --dp 'horovod'; choose one of torch-ddp"),
    ({"reduce_dtype": "float64"}, "unknown --reduce-dtype 'float64'"),
    ({"ranks": 2, "plant": ((1, 2),)}, "STEP@RANK with 0 <= RANK < --ranks 2"),
    ({"ranks": 2, "plant": ((-1, 0),)}, "0 <= STEP < --steps 8, got (-1, 0)"),
    ({"ranks": 2, "plant": ((8, 0),)}, "0 <= STEP < --steps 8, got (8, 0)"),
    ({"ranks": 2, "precision": "pure-fp16"}, "keeps float16 parameters"),
    ({"ranks": 2, "plant": (("3", 1),)}, "STEP@RANK with 0 <= RANK < --ranks 2"),
    ({"ranks": 2, "plant": ((True, 1),)}, "got (True, 1)"),
    ({"ranks": 2, "plant": ((1.0, 1),)}, "got (1.0, 1)"),
    ({"ranks": 2, "plant": ((1, 0, 1),)}, "got (1, 0, 1)"),
])
def test_bad_data_parallel_configurations_are_named(changes: dict[str, object], msg: str) -> None:
    """Inputs: ranks 0, True, 3 with batch 8; dp 'horovod'; reduce dtype float64; plants on
    a missing rank, a negative step and step 8 of an 8-step run (never reached); pure-fp16
    with ranks; plants of a string step, a bool step, a float step and a triple. Expected:
    TrainError with the listed message. Pass: each."""
    with pytest.raises(TrainError) as e:
        replace(SMALL, **changes)  # type: ignore[arg-type]
    assert msg in str(e.value)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ampref", "train", *args], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.clause("DPL-ERR-001")
@pytest.mark.parametrize("args,msg", [
    (["--precision", "amp-fp16", "--ranks", "2", "--plant-overflow", "3x1"],
     "--plant-overflow takes STEP@RANK (e.g. 30@2), got '3x1'"),
    (["--compare", "fp32,amp-fp16", "--ranks", "2", "--dp", "apex,megatron"],
     "--dp with several names compares frameworks on one mode"),
    (["--precision", "amp-fp16", "--ranks", "2", "--dp", "apex,apex"], "--dp lists apex more"),
    (["--precision", "amp-fp16", "--reduce-dtype", "int8"], "invalid choice"),
])
def test_bad_data_parallel_flags_give_one_line_and_exit_2(args: list[str], msg: str,
                                                          tmp_path: Path) -> None:
    """Inputs: a malformed plant, several --dp names with --compare, a repeated --dp,
    reduce dtype int8. Expected: exit 2, the message, no traceback, at most two lines.
    Pass: each."""
    r = _cli(*args, "--steps", "1", "--out", str(tmp_path / "o"), "--no-report", "--quiet")
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # argparse adds its usage line


class _Weights:
    def __init__(self, *arrays: list[float]) -> None:
        self.arrays = [np.array(a, np.float32) for a in arrays]

    def master_weights(self) -> list[np.ndarray]:
        return self.arrays


@pytest.mark.clause("DPL-TRN-003")
def test_weight_gap_is_the_largest_difference_over_the_largest_weight() -> None:
    """Inputs: two runs' float32 master weights [1, 2, 4] and [0.5, inf] against
    [1, 2.5, 4] and [0.5, 3]; and weights against all-zero twins. Expected (by hand): the
    largest |a - b| over finite pairs (0.5) over the largest finite |b| (4): 0.125, and 1
    of 5 elements differing bitwise besides the inf (2 of 5: 0.4); 0 relative difference
    against zeros (no division by zero), every element differing. Pass: equal."""
    a = _Weights([1.0, 2.0, 4.0], [0.5, np.inf])
    b = _Weights([1.0, 2.5, 4.0], [0.5, 3.0])
    assert weight_gap(a, b) == {"max_rel_diff": 0.125, "differ_fraction": 0.4}
    zeros = _Weights([0.0, 0.0])
    assert weight_gap(_Weights([1.0, -1.0]), zeros) == {"max_rel_diff": 0.0,
                                                         "differ_fraction": 1.0}


def _row(step: int, applied: bool, ulps: int, rel: float, gap: float | None) -> dict:
    ranks = {"triggered_by": [1] if not applied else [], "flagged": [0, 1] if not applied
             else [], "found_inf": not applied, "reduce_ulps": ulps, "reduce_rel": rel}
    row = {"step": step, "applied": applied, "ranks": ranks}
    if gap is not None:
        row["vs_one_rank"] = {"max_rel_diff": gap, "differ_fraction": 0.0}
    return row


@pytest.mark.clause("DPL-TRN-003")
def test_the_data_parallel_summary_keeps_the_last_twin_gap_and_the_largest_deviations() -> None:
    """Inputs: a hand-made 4-step history (step 2 skipped on rank 1's overflow; reduction
    deviations 3, 7, 0, 5 ulps and 1e-7 .. 4e-7 relative; twin gaps at steps 1 and 3, and
    a row without one) and an empty history. Expected: the skip listed with its
    triggering and flagging ranks; max 7 ulps and 4e-7; the gap of step 3 (the last one,
    not an earlier one); with no rows 0, 0.0, no skips and no gap. Pass: equal."""
    cfg = replace(SMALL, ranks=2)
    history = [_row(0, True, 3, 1e-7, None), _row(1, True, 7, 2e-7, 0.25),
               _row(2, False, 0, 4e-7, None), _row(3, True, 5, 3e-7, 0.5),
               {"step": 4, "applied": True}]  # a row without data-parallel fields
    s = dp_summary(cfg, history)
    assert s["skips"] == [{"step": 2, "triggered_by": [1], "flagged": [0, 1],
                           "found_inf": True}]
    assert (s["max_reduce_ulps"], s["max_reduce_rel"]) == (7, 4e-7)
    assert s["vs_one_rank"] == {"max_rel_diff": 0.5, "differ_fraction": 0.0}
    empty = dp_summary(cfg, [])
    assert (empty["skips"], empty["max_reduce_ulps"], empty["max_reduce_rel"],
            empty["vs_one_rank"]) == ([], 0, 0.0, None)
