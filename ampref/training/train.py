"""``ampref train``: run one precision mode (or several, same seed and data order) into
an output folder, with checkpoints, metrics, a numerics report and a comparison table.

The pieces: :mod:`ampref.training.config` (modes, configuration), :mod:`ampref.training.corpus`
(data), :mod:`ampref.training.run` (model and steps), :mod:`ampref.training.checkpoint`,
:mod:`ampref.training.stats` and :mod:`ampref.training.report`; this module drives them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from ampref.common.atomicio import atomic_write
from .checkpoint import (atomic_savez, latest_checkpoint, load_checkpoint, save_checkpoint,
                         tidy)
from .corpus import Corpus, load_corpus
from .quantreport import ROLE_NAMES, quant_summary
from .report import write_compare_plot, write_report
from .dataparallel import dp_summary, dp_table, twin_config, weight_gap
from .run import Run
from .config import MODES, TrainConfig, TrainError

__all__ = ["compare", "compare_dp", "compare_table", "dp_table", "train"]


def _need_matplotlib() -> None:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise TrainError("the numerics report needs matplotlib: pip install 'ampref[plot]' "
                         "(or pass --no-report)") from None


def _out_path(out: str | Path) -> Path:
    if not str(out).strip():
        raise TrainError("--out must name an output folder, got an empty path "
                         "(the default is runs/train)")
    return Path(out)


def _check_out(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".ampref-write-test"
        probe.write_text("ok")
        probe.unlink()
    except OSError as e:
        raise TrainError(f"output folder {str(out)!r} is not writable: {e.strerror or e}") from None


def train(cfg: TrainConfig, out: str | Path, *, resume: bool = False, progress: bool = True,
          report: bool = True, stop_after: int | None = None,
          progress_row: int = 0) -> dict[str, Any]:
    """Run (or resume) one mode into ``out``; returns the summary dict.

    ``stop_after`` ends the process-local loop early after that many steps of this call
    (checkpointing first), to test resumption. ``progress_row`` is the terminal row of
    the progress bar (one per mode when :func:`compare` runs modes in parallel).
    """
    # why long: the run loop with its checkpoint, resume and stop-after bookkeeping; the
    # branches share the loop's state
    if report:
        _need_matplotlib()
    out = _out_path(out)
    ck = out / "ckpt"
    last = latest_checkpoint(ck) if resume else None
    if resume and last is None:  # refuse before creating any folder
        raise TrainError(f"--resume: no checkpoint in {str(ck)!r} (nothing to continue; "
                         "run without --resume first)")
    _check_out(out)
    tidy(out, ck, resume=resume)
    corpus = Corpus(load_corpus(cfg.data), cfg.context)
    run = Run(cfg, corpus)
    if last is not None:
        load_checkpoint(run, last)
        if run.state.step > cfg.steps:
            raise TrainError(f"--resume: the checkpoint is at step {run.state.step}, beyond "
                             f"--steps {cfg.steps}")
    bar = _progress(cfg, run.state.step, progress, progress_row)
    # an N-rank run steps a one-rank twin beside it to measure what the ranks change
    # (not after a resume: the twin has no checkpoint)
    twin = Run(twin_config(cfg), corpus) if cfg.ranks > 1 and last is None else None
    done_here = 0
    t_start = time.perf_counter()
    while run.state.step < cfg.steps:
        rec = run.step()
        if twin is not None:
            twin.step()
            rec["vs_one_rank"] = weight_gap(run, twin)
        done_here += 1
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{rec['loss']:.3f}", scale=f"{run.scale:g}")
        if run.state.step % cfg.checkpoint_every == 0 or run.state.step == cfg.steps or \
                (stop_after is not None and done_here >= stop_after):
            run.state.wall += time.perf_counter() - t_start
            t_start = time.perf_counter()
            save_checkpoint(run, ck)
        if stop_after is not None and done_here >= stop_after:
            break
    if bar is not None:
        bar.close()
    run.state.wall += time.perf_counter() - t_start
    summary = _summary(run)
    if run.state.step >= cfg.steps:
        names = [n for n, _ in run.model.named_parameters()]
        atomic_savez(out / "final.npz", dict(zip(names, run.master_weights(), strict=True)))
        _write_metrics(run, out, summary)
        if report:
            write_report(run, out, summary)
    return summary


def _progress(cfg: TrainConfig, start: int, enabled: bool, row: int) -> Any:
    if not enabled:
        return None
    from tqdm import tqdm

    return tqdm(total=cfg.steps, initial=start, desc=cfg.precision, unit="step", leave=True,
                position=row)


def _summary(run: Run) -> dict[str, Any]:
    h = [r for r in run.state.history if not r.get("removed")]
    tail = [r["loss"] for r in h[-20:] if r["applied"] and math.isfinite(r["loss"])]
    low = sum(r.get("low_elements", 0) for r in h)
    val = run.evaluate()
    steps_timed = [r["seconds"] for r in h if "seconds" in r]
    return {
        "mode": run.cfg.precision, "about": run.mode.about, "steps": run.state.step,
        "final_loss": float(np.mean(tail)) if tail else float("nan"),
        "val_loss": val, "val_bpc": val / math.log(2),
        "skipped_steps": len(run.state.skipped), "skipped": run.state.skipped,
        "injected": run.state.injected,
        "final_scale": run.scale if run.scaler is not None else None,
        "underflow_fraction": (sum(r.get("underflow", 0) for r in h) / low) if low else 0.0,
        "overflow_fraction": (sum(r.get("overflow", 0) for r in h) / low) if low else 0.0,
        "grad_below_fp16_fraction": (sum(r.get("grad_below_fp16", 0) for r in h)
                                     / max(1, sum(r.get("grad_nonzero", 0) for r in h))),
        "quant": quant_summary(run.state.quant_series),
        "wall_s": run.state.wall,
        "steps_per_s": len(steps_timed) / sum(steps_timed) if steps_timed else 0.0,
        **({"data_parallel": dp_summary(run.cfg, h)} if run.parallel is not None else {}),
    }


def _write_metrics(run: Run, out: Path, summary: dict[str, Any]) -> None:
    atomic_write(str(out / "metrics.json"), json.dumps(
        {"config": asdict(run.cfg), "summary": summary, "history": run.state.history,
         "layers": run.state.layer_series, "quant_series": run.state.quant_series,
         "what_if": run.state.what_if,
         "scaler_events": run.scaler.audit_log() if run.scaler is not None else []},
        indent=1, default=str) + "\n")
    keys = ["step", "loss", "scale", "scale_after", "applied", "injected", "removed", "underflow",
            "overflow", "low_elements", "grad_nonzero", "grad_below_fp16", "seconds"]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=keys, extrasaction="ignore")
    w.writeheader()
    for r in run.state.history:
        w.writerow(r)
    atomic_write(str(out / "metrics.csv"), buf.getvalue())


def compare(cfg: TrainConfig, modes: list[str], out: str | Path, *, progress: bool = True,
            report: bool = True, jobs: int = 1) -> list[dict[str, Any]]:
    """Run several modes with the same seed and data order into ``out/<mode>``;
    write ``out/compare.json`` and ``out/compare.md``; return the summaries.

    ``jobs`` > 1 trains that many modes at once in worker processes (one BLAS thread
    each). The results are the same bits either way: every sum and matmul of the engine
    is exactly rounded, so nothing depends on threads or on which process ran a mode;
    only the timing columns change.
    """
    for m in modes:
        if m not in MODES:
            raise TrainError(f"unknown precision mode {m!r}; choose one of {', '.join(MODES)}")
    dup = sorted({m for m in modes if modes.count(m) > 1})
    if dup:
        raise TrainError(f"--compare lists {', '.join(dup)} more than once; each mode runs once "
                         "into its own folder")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise TrainError(f"--jobs must be an integer >= 1, got {jobs!r}")
    out = _out_path(out)
    _check_out(out)
    configs = [replace(cfg, precision=m,
                       inject_nonfinite=cfg.inject_nonfinite if MODES[m].scaler else 0.0)
               for m in modes]
    if jobs > 1 and len(modes) > 1:
        rows = _train_parallel(configs, out, progress, report, min(jobs, len(modes)))
    else:
        rows = [train(c, out / c.precision, progress=progress, report=report) for c in configs]
    atomic_write(str(out / "compare.json"), json.dumps(rows, indent=1) + "\n")
    table = compare_table(rows)
    quant = quant_table(rows)
    atomic_write(str(out / "compare.md"), table + "\n" + (f"\n{quant}\n" if quant else ""))
    if report:
        write_compare_plot(out, modes)
    return rows


_ONE_THREAD = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
               "AMPREF_KERNEL_THREADS")


def _train_parallel(configs: list[TrainConfig], out: Path, progress: bool, report: bool,
                    jobs: int) -> list[dict[str, Any]]:
    """``train`` of each configuration in ``jobs`` spawned processes; summaries in order."""
    # spawned workers read these when they import NumPy and run kernels: one BLAS thread
    # and one kernel thread per worker, so that ``jobs`` workers do not oversubscribe the
    # cores
    saved = {k: os.environ.get(k) for k in _ONE_THREAD}
    os.environ.update({k: "1" for k in _ONE_THREAD})
    try:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
            futures = [pool.submit(train, c, out / c.precision, progress=progress,
                                   report=report, progress_row=i)
                       for i, c in enumerate(configs)]
            return [f.result() for f in futures]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def quant_table(rows: list[dict[str, Any]]) -> str:
    """The FP8/FP4 modes' quantization, per tensor role, averaged over steps and layers."""
    q = [r for r in rows if r.get("quant")]
    if not q:
        return ""
    lines = ["| mode | tensor | relative MSE | underflow to 0 % | clipped % |",
             "|---|---|---|---|---|"]
    for r in q:
        for role, d in r["quant"].items():
            lines.append(f"| {r['mode']} | {ROLE_NAMES[role]} | {d['rel_mse']:.2e} "
                         f"| {d['underflow_pct']:.3f} | {d['saturation_pct']:.3f} |")
    return "\n".join(lines)


def compare_table(rows: list[dict[str, Any]]) -> str:
    head = ("| mode | final loss | val bits/char | skipped | final scale | underflow to 0 "
            "| grads < fp16 min | steps/s | wall s |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        sc = "-" if r["final_scale"] is None else f"{r['final_scale']:g}"
        lines.append(f"| {r['mode']} | {r['final_loss']:.4f} | {r['val_bpc']:.3f} "
                     f"| {r['skipped_steps']} | "
                     f"{sc} | {r['underflow_fraction']:.2e} "
                     f"| {r['grad_below_fp16_fraction']:.2e} | "
                     f"{r['steps_per_s']:.2f} | {r['wall_s']:.1f} |")
    return "\n".join(lines)


def compare_dp(cfg: TrainConfig, names: list[str], out: str | Path, *, progress: bool = True,
               report: bool = True) -> list[dict[str, Any]]:
    """Run ``cfg`` under each data-parallel semantics in ``names`` into ``out/<name>``;
    write ``out/dp_compare.json`` and ``out/dp_compare.md``; return the summaries."""
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise TrainError(f"--dp lists {', '.join(dup)} more than once")
    configs = [replace(cfg, dp=n) for n in names]  # validates every name first
    out = _out_path(out)
    _check_out(out)
    rows = [train(c, out / c.dp, progress=progress, report=report) for c in configs]
    atomic_write(str(out / "dp_compare.json"), json.dumps(rows, indent=1) + "\n")
    atomic_write(str(out / "dp_compare.md"), dp_table(rows) + "\n")
    return rows

