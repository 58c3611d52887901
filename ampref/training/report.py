"""The numerics report of ``ampref train``: PNG plots and a Markdown summary.

Plots (matplotlib, Agg backend): the loss curve; the loss-scale trajectory with skipped
and injected steps marked; per-layer histograms of log2 |activation| and log2 |scaled
gradient| against the representable range of the mode's low format (smallest
subnormal, smallest normal, largest finite); per-layer fractions of gradient elements
that underflowed to zero or overflowed when rounded into the low format, over time.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ampref.formats.table import get_format
from .stats import LOG2_BINS
from .dataparallel import dp_table
from .quantreport import what_if_lines, write_quant_plot

__all__ = ["write_report", "write_compare_plot"]


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _range_lines(ax: Any, fmt_name: str) -> None:
    f = get_format(fmt_name)
    for x, label, style in ((math.log2(f.smallest_subnormal), "smallest subnormal", ":"),
                            (math.log2(f.tiny), "smallest normal", "--"),
                            (math.log2(f.max), "max", "-")):
        ax.axvline(x, color="crimson", linestyle=style, linewidth=0.8, label=f"{fmt_name} {label}")


def _low_format(run: Any) -> str:
    m = run.mode
    return m.autocast or (m.params if m.params != "float32" else "float16")


def _hist_grid(plt: Any, hists: dict[str, list[int]], title: str, fmt_name: str,
               path: Path) -> None:
    names = sorted(hists)
    if not names:
        return
    cols = 4
    rows = math.ceil(len(names) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.4 * rows), squeeze=False)
    centers = (LOG2_BINS[:-1] + LOG2_BINS[1:]) / 2
    # more panels than names: the rest are hidden below
    for ax, name in zip(axes.flat, names, strict=False):
        counts = np.asarray(hists[name])
        # one filled step artist per panel: a bar per bin made thousands of patches, and
        # drawing them took about 40 % of the default run's wall time
        ax.stairs(counts, LOG2_BINS, fill=True, color="steelblue")
        _range_lines(ax, fmt_name)
        nz = np.flatnonzero(counts)
        lo = min(centers[nz[0]] if nz.size else -30,
                 math.log2(get_format(fmt_name).smallest_subnormal)) - 4
        hi = max(centers[nz[-1]] if nz.size else 10, math.log2(get_format(fmt_name).max)) + 4
        ax.set_xlim(lo, hi)
        ax.set_title(name, fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=6)
    fig.suptitle(title + " (x: log2 |value|)")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def write_report(run: Any, out: Path, summary: dict[str, Any]) -> None:
    """Write loss.png, scale.png, hist_*.png, underflow.png (recipe modes: quantization.png
    and the what-if table) and report.md into ``out``."""
    plt = _plt()
    st = run.state
    h = [r for r in st.history if not r.get("removed")]
    fmt_name = _low_format(run)
    _loss_plot(plt, run, h, out / "loss.png")
    _scale_plot(plt, run, h, out / "scale.png")
    last = max(st.hists, key=int) if st.hists else None
    if last is not None:
        mode = run.cfg.precision
        _hist_grid(plt, st.hists[last]["gradients"],
                   f"{mode}: gradients (x loss scale) at step {last}", fmt_name,
                   out / "hist_gradients.png")
        _hist_grid(plt, st.hists[last]["activations"], f"{mode}: activations at step {last}",
                   fmt_name, out / "hist_activations.png")
    _underflow_plot(plt, st.layer_series, out / "underflow.png")
    quant = []
    if st.quant_series:
        write_quant_plot(plt, st.quant_series, run.cfg.precision, out / "quantization.png")
        quant = ["## Quantization (FP8/FP4 GEMMs of the block linears)", "",
                 "![quantization per layer](quantization.png)", "",
                 *what_if_lines(st.what_if, summary["steps"] - 1), ""]
    if "data_parallel" in summary:
        quant += _dp_section(plt, run, summary["data_parallel"], h, out / "data_parallel.png")
    from ampref.common.atomicio import atomic_write

    atomic_write(str(out / "report.md"), "\n".join(_report_lines(run, summary, fmt_name, quant))
                 + "\n")


def _dp_section(plt: Any, run: Any, d: dict[str, Any], h: list[dict[str, Any]],
                path: Path) -> list[str]:
    """The data-parallel plot (reduction error and distance from the one-rank twin per
    step, skipped steps marked with the rank that planted the overflow) and its table."""
    rows = [r for r in h if "ranks" in r]
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.semilogy([r["step"] for r in rows], [max(r["ranks"]["reduce_rel"], 1e-12) for r in rows],
                label=f"reduced gradient vs exactly rounded ({d['reduce_dtype']}, {d['dp']})")
    twin = [r for r in rows if "vs_one_rank" in r]
    if twin:
        ax.semilogy([r["step"] for r in twin],
                    [max(r["vs_one_rank"]["max_rel_diff"], 1e-12) for r in twin],
                    label="weights vs one rank (max rel. diff)")
    for k in d["skips"]:
        ax.axvline(k["step"], color="crimson", linewidth=0.8, linestyle=":")
        ax.annotate(f"skip, rank {k['triggered_by'] or '-'}", (k["step"], 1e-11), fontsize=7,
                    rotation=90, color="crimson")
    ax.set_xlabel("step")
    ax.set_ylabel("relative difference")
    ax.set_title(f"{run.cfg.precision}: {d['ranks']} ranks, {d['dp']}")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return ["## Data parallelism", "",
            f"{d['ranks']} ranks emulated with {d['dp']}'s semantics (specs/distributed.md), "
            f"gradients reduced in {d['reduce_dtype']}; planted overflows (step, rank): "
            f"{d['planted'] or 'none'}.", "",
            dp_table([{"data_parallel": d, "final_scale": run.scaler.scale if run.scaler
                       else None}]), "", f"![data parallel]({path.name})", ""]


def _loss_plot(plt: Any, run: Any, h: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot([r["step"] for r in h], [r["loss"] for r in h], linewidth=1)
    ax.set_xlabel("step")
    ax.set_ylabel("training loss (nats/char)")
    ax.set_title(f"{run.cfg.precision}: loss")
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _scale_plot(plt: Any, run: Any, h: list[dict[str, Any]], path: Path) -> None:
    """The loss scale over steps with skipped and injected steps marked."""
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.semilogy([r["step"] for r in h], [r["scale"] for r in h], drawstyle="steps-post",
                label="loss scale")
    sk = [r for r in h if not r["applied"]]
    ax.scatter([r["step"] for r in sk], [r["scale"] for r in sk], color="crimson", marker="x",
               label=f"skipped ({len(sk)})", zorder=3)
    inj = [r for r in h if r.get("injected")]
    ax.scatter([r["step"] for r in inj], [r["scale"] for r in inj], facecolors="none",
               edgecolors="black", s=60, label=f"injected inf/NaN ({len(inj)})", zorder=4)
    ax.set_xlabel("step")
    ax.set_ylabel("scale")
    ax.set_title(f"{run.cfg.precision}: loss scale" + ("" if run.scaler else " (no scaler: 1)"))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _report_lines(run: Any, summary: dict[str, Any], fmt_name: str,
                  quant: list[str]) -> list[str]:
    """report.md: the run's metrics table, the figures and the file list."""
    sc = "-" if summary["final_scale"] is None else f"{summary['final_scale']:g}"
    return [
        f"# ampref train: {run.cfg.precision}", "",
        f"{summary['about']}. {summary['steps']} steps, seed {run.cfg.seed}, "
        f"batch {run.cfg.batch}, "
        f"context {run.cfg.context}, width {run.cfg.width}, {run.cfg.blocks} blocks.", "",
        "| metric | value |", "|---|---|",
        f"| final training loss (mean of last 20 applied steps) | {summary['final_loss']:.4f} |",
        f"| validation bits per character | {summary['val_bpc']:.3f} |",
        f"| skipped steps | {summary['skipped_steps']} |",
        f"| final loss scale | {sc} |",
        f"| gradient elements underflowed to 0 in {fmt_name} "
        f"| {summary['underflow_fraction']:.3e} |",
        f"| gradient elements overflowed | {summary['overflow_fraction']:.3e} |",
        f"| master gradients below fp16's smallest subnormal / 2 (x scale) | "
        f"{summary['grad_below_fp16_fraction']:.3e} |",
        f"| steps per second | {summary['steps_per_s']:.2f} |", "",
        f"Injected non-finite gradients at steps: {summary['injected'] or 'none'}.  ",
        f"Skipped steps: {summary['skipped'] or 'none'}.", "",
        "![loss](loss.png)", "", "![scale](scale.png)", "",
        "![gradient histograms](hist_gradients.png)", "",
        "![activation histograms](hist_activations.png)", "",
        "![underflow](underflow.png)", "",
        *quant,
        "Files: `metrics.json`, `metrics.csv` (one row per step), `final.npz` (float32 master "
        "weights by parameter name), `ckpt/` (checkpoints).",
    ]


def _underflow_plot(plt: Any, series: dict[str, list[list[float]]], path: Path) -> None:
    """Per-layer underflow and overflow fractions over steps; the legend sits beside the
    panels, and a panel with nothing to show says so instead of drawing a flat line."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.2))
    any_over = False
    for name, rows in sorted(series.items()):
        arr = np.asarray(rows)
        a1.plot(arr[:, 0], arr[:, 1], linewidth=0.8, label=name)
        if arr[:, 2].any():
            any_over = True
            a2.plot(arr[:, 0], arr[:, 2], linewidth=0.8, label=name)
    a1.set_title("gradient elements underflowed to 0")
    a2.set_title("gradient elements overflowed to inf")
    for a in (a1, a2):
        a.set_xlabel("step")
        a.set_ylabel("fraction of the layer's elements")
    if not series:
        for a in (a1, a2):
            a.text(0.5, 0.5, "no low-precision gradients in this mode", ha="center",
                   va="center", transform=a.transAxes)
    elif not any_over:
        a2.text(0.5, 0.5, "no gradient element overflowed in this run", ha="center",
                va="center", transform=a2.transAxes)
        a2.set_yticks([])
        a2.set_xlim(a1.get_xlim())
    if series:
        fig.legend(*a1.get_legend_handles_labels(), loc="center left", bbox_to_anchor=(0.81, 0.5),
                   fontsize=6, title="layer", title_fontsize=7)
    fig.tight_layout(rect=(0, 0, 0.8, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _smoothed_losses(out: Path, modes: list[str], k: int = 10) -> dict[str, tuple[int, np.ndarray]]:
    """Per mode (first step, moving mean with window k) of the training loss; each value
    sits at the last step of its window; NaN losses (skipped steps) are filled."""
    curves = {}
    for m in modes:
        data = json.loads((out / m / "metrics.json").read_text())
        h = [r for r in data["history"] if not r.get("removed")]
        loss = np.array([r["loss"] for r in h], dtype=float)
        w = min(k, len(loss)) or 1
        fill = np.nanmean(loss) if np.isfinite(loss).any() else 0.0
        smooth = np.convolve(np.nan_to_num(loss, nan=fill), np.ones(w) / w, mode="valid")
        curves[m] = (w - 1, smooth)
    return curves


def write_compare_plot(out: Path, modes: list[str]) -> None:
    """``compare.png``: the loss curves of several modes, and below them each mode's
    difference from the reference mode (fp32 when compared, else the first), which is
    what tells the modes apart when the curves lie on top of each other."""
    plt = _plt()
    curves = _smoothed_losses(out, modes)
    ref = "fp32" if "fp32" in curves else modes[0]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 6), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    for i, (m, (start, c)) in enumerate(curves.items()):
        steps = np.arange(len(c)) + start
        top.plot(steps, c, label=m, linewidth=1, color=f"C{i}")  # one colour per mode
        if m != ref:
            n = min(len(c), len(curves[ref][1]))
            bottom.plot(steps[:n], c[:n] - curves[ref][1][:n], label=f"{m} - {ref}",
                        linewidth=1, color=f"C{i}")
    bottom.axhline(0.0, color="black", linewidth=0.6)
    top.set_ylabel("training loss\n(moving mean of 10)")
    top.set_title("modes compared with the same seed and data order")
    top.legend(fontsize=8)
    bottom.set_ylabel(f"difference from {ref}")
    bottom.set_xlabel("step (end of the averaging window)")
    if len(curves) > 1:
        bottom.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "compare.png", dpi=80)
    plt.close(fig)
