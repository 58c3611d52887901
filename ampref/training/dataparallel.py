"""``ampref train --ranks N``: one training step on N emulated ranks (``specs/distributed.md``
DPL-TRN-*), and the comparison with a one-rank twin.

Each rank runs forward and scaled backward on its shard of the batch (rows
``r*B/N .. (r+1)*B/N``) with the same weights; planted faults land in one rank's local
gradient; :func:`ampref.distributed.data_parallel_step` averages the gradients under the
run's framework semantics and decides the step; the scaler makes one transition with
that decision, and every rank applies the same update, so one model stands for all.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.distributed import DPStep, data_parallel_step, get_dp
from ampref.engine.tensor import observe_gradients
from ampref.formats.ordinal import ordinal
from .config import TrainConfig
from .stats import StepStats

__all__ = ["DataParallelStep", "dp_summary", "dp_table", "max_ulps", "twin_config", "weight_gap"]


def max_ulps(a: npt.NDArray[np.float32], b: npt.NDArray[np.float32]) -> int:
    """Largest distance in float32 units in the last place over elements finite in both
    (0 for equal bits; +0 and -0 are 0 apart)."""
    ok = np.isfinite(a) & np.isfinite(b)
    if not ok.any():
        return 0
    return int(np.abs(ordinal(a[ok]) - ordinal(b[ok])).max())


class DataParallelStep:
    """The data-parallel part of one step of a :class:`~ampref.training.run.Run`."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.cfg: TrainConfig = run.cfg
        self.dp = get_dp(self.cfg.dp_name)
        self._exact = replace(self.dp, order="exact")

    def _local(self, ids: np.ndarray, s: int, r: int, stats: StepStats
               ) -> tuple[float, list[np.ndarray], bool]:
        """Rank ``r``'s loss, local (scaled) gradients and whether a fault was planted."""
        run, cfg = self.run, self.cfg
        shard = cfg.batch // cfg.ranks
        run.opt.zero_grad()
        loss = run.loss_on(ids[r * shard:(r + 1) * shard])
        run.end_capture()  # histograms show rank 0's activations
        with observe_gradients(stats):
            (run.scaler.scale_loss(loss) if run.scaler is not None else loss).backward()
        grads = [np.array(p.backend.to_numpy(p.grad), dtype=np.float32) if p.grad is not None
                 else np.zeros(p.shape, np.float32) for p in run.model.parameters()]
        planted = False
        if run.faults.injected_at(s) and run.faults.rank_at(s, cfg.ranks) == r:
            run.faults.plant_arrays(grads, s)
            planted = True
        if (s, r) in cfg.plant:
            run.faults.plant_arrays(grads, s, value=float("inf"), rank=r)
            planted = True
        return loss.item(), grads, planted

    def step(self, ids: np.ndarray, s: int, stats: StepStats) -> tuple[float, bool, bool,
                                                                         dict[str, Any]]:
        """(mean loss over ranks, applied, any fault planted, the per-rank record)."""
        run, cfg = self.run, self.cfg
        losses, per_rank, planted = [], [], []
        for r in range(cfg.ranks):
            loss, grads, p = self._local(ids, s, r, stats)
            losses.append(loss)
            per_rank.append(grads)
            planted.append(p)
        res = data_parallel_step(per_rank, self.dp, reduce_dtype=cfg.reduce_dtype,
                                 first_iteration=s == 0)
        for p, g in zip(run.model.parameters(), res.reduced, strict=True):
            p.grad = p.backend.asarray(g)
        if run.scaler is not None:
            run.opt.unscale_(run.scaler)
            applied = run.scaler.update(found_inf=res.skip) and run.opt.step()
        else:
            applied = run.opt.step()
        return float(np.mean(losses)), bool(applied), any(planted), self._record(res, per_rank)

    def _record(self, res: DPStep, per_rank: list[list[np.ndarray]]) -> dict[str, Any]:
        exact = data_parallel_step(per_rank, self._exact, reduce_dtype="float32")
        pairs = list(zip(res.reduced, exact.reduced, strict=True))
        ulps = max((max_ulps(a.reshape(-1), b.reshape(-1)) for a, b in pairs), default=0)
        return {"local_nonfinite": [int(v) for v in res.local_nonfinite],
                "flagged": [int(v) for v in res.flags], "found_inf": res.found_inf[0],
                "triggered_by": res.triggered_by, "reduce_ulps": ulps,
                "reduce_rel": _rel_gap([a for a, _ in pairs], [b for _, b in pairs])}


def twin_config(cfg: TrainConfig) -> TrainConfig:
    """The one-rank run an N-rank run is compared with: same everything, its plants on
    rank 0 at the same steps (so it skips the same steps when the scaler does)."""
    return replace(cfg, ranks=1, plant=tuple(sorted({(s, 0) for s, _ in cfg.plant})))


def _rel_gap(xs: list[npt.NDArray[np.float32]], ys: list[npt.NDArray[np.float32]]) -> float:
    """max |x - y| over finite elements, relative to max |y| (0 when y is all zero)."""
    diff, top = 0.0, 0.0
    for x, y in zip(xs, ys, strict=True):
        ok = np.isfinite(x) & np.isfinite(y)
        if ok.any():
            diff = max(diff, float(np.abs(x[ok].astype(np.float64) - y[ok]).max()))
            top = max(top, float(np.abs(y[ok]).max()))
    return diff / top if top else 0.0


def weight_gap(a: Any, b: Any) -> dict[str, float]:
    """How far run ``a``'s float32 master weights are from run ``b``'s: the largest
    |difference| relative to b's largest |weight|, and the share of elements that differ
    bitwise. (Not ulps: a weight near zero is many ulps from its twin after any change.)"""
    wa, wb = a.master_weights(), b.master_weights()
    differ = sum(int((x.view(np.uint32) != y.view(np.uint32)).sum())
                 for x, y in zip(wa, wb, strict=True))
    return {"max_rel_diff": _rel_gap(wa, wb),
            "differ_fraction": differ / max(1, sum(x.size for x in wa))}



def dp_summary(cfg: TrainConfig, history: list[dict[str, Any]]) -> dict[str, Any]:
    """The data-parallel block of a run's summary: per skipped step the ranks that
    planted or flagged the overflow and the agreed found_inf; the largest reduction
    deviation; the last comparison with the one-rank twin (if it ran)."""
    rows = [r for r in history if "ranks" in r]
    skips = [{"step": r["step"], "triggered_by": r["ranks"]["triggered_by"],
              "flagged": r["ranks"]["flagged"], "found_inf": r["ranks"]["found_inf"]}
             for r in rows if not r["applied"]]
    twin = [r["vs_one_rank"] for r in rows if "vs_one_rank" in r]
    return {"ranks": cfg.ranks, "dp": cfg.dp_name, "reduce_dtype": cfg.reduce_dtype,
            "planted": [list(p) for p in cfg.plant], "skips": skips,
            "max_reduce_ulps": max((r["ranks"]["reduce_ulps"] for r in rows), default=0),
            "max_reduce_rel": max((r["ranks"]["reduce_rel"] for r in rows), default=0.0),
            "vs_one_rank": twin[-1] if twin else None}


def dp_table(rows: list[dict[str, Any]]) -> str:
    """One row per data-parallel semantics: each skipped step with the rank that planted
    the overflow, the ranks whose check fired and the agreed found_inf; the final scale;
    the reduction's deviation; the distance from the one-rank twin."""
    lines = ["| semantics | skipped step: planted by / flagged by / found_inf | final scale "
             "| max reduce error (rel) | weights vs 1 rank: max rel diff, elements differing |",
             "|---|---|---|---|---|"]
    for r in rows:
        d = r["data_parallel"]
        skips = "; ".join(
            f"{k['step']}: {k['triggered_by'] or '-'} / "
            f"{[i for i, f in enumerate(k['flagged']) if f] or '-'} / {k['found_inf']:g}"
            for k in d["skips"]) or "none"
        twin = d["vs_one_rank"]
        gap = "-" if twin is None else (f"{twin['max_rel_diff']:.2e}, "
                                         f"{100 * twin['differ_fraction']:.1f} %")
        sc = "-" if r["final_scale"] is None else f"{r['final_scale']:g}"
        lines.append(f"| {d['dp']} ({d['ranks']} ranks, {d['reduce_dtype']}) | {skips} | {sc} "
                     f"| {d['max_reduce_rel']:.2e} | {gap} |")
    return "\n".join(lines)
