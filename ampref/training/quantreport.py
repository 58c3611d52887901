"""What the FP8/FP4 training modes do to each layer's tensors: summaries, the per-layer
plot over steps and the "what-if" table (specs/train.md TRN-QNT-004/005)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ampref import recipes
from ampref.engine.functional.quantized import operand_stats
from ampref.recipes.roles import GEMM_RECIPES
from .config import RECIPE_PROFILES

__all__ = ["quant_summary", "write_quant_plot", "what_if", "what_if_lines", "ROLE_NAMES"]

ROLE_NAMES = {"x": "activation", "w": "weight", "g": "gradient"}
#: column of each statistic in a RunState.quant_series row (after the step)
_COL = {"amax": 1, "underflow_pct": 2, "saturation_pct": 3, "rel_mse": 4, "scale_min": 5,
        "scale_max": 6}


def quant_summary(series: dict[str, list[list[float]]]) -> dict[str, dict[str, float]]:
    """Per role: underflow %, clipped % and relative MSE averaged over steps and layers."""
    out: dict[str, dict[str, float]] = {}
    for role in ROLE_NAMES:
        rows = [r for k, v in series.items() if k.endswith(f"/{role}") for r in v]
        if rows:
            a = np.asarray(rows, np.float64)
            out[role] = {k: float(a[:, _COL[k]].mean())
                         for k in ("underflow_pct", "saturation_pct", "rel_mse")}
    return out


def write_quant_plot(plt: Any, series: dict[str, list[list[float]]], mode: str,
                     path: Path) -> None:
    """quantization.png: per layer and role, relative MSE, underflow %, clipped %, the
    tensor's amax (the amax history of delayed scaling) and the smallest and largest
    decoded block scale, over steps."""
    fig, axes = plt.subplots(2, 3, figsize=(16, 7))
    panels = (("rel_mse", "relative MSE vs unquantized", True),
              ("underflow_pct", "nonzero elements quantized to 0 (%)", False),
              ("saturation_pct", "elements clipped to the format max (%)", False),
              ("amax", "amax of the tensor", True),
              ("scale_min", "smallest block scale (decoded, > 0)", True),
              ("scale_max", "largest block scale (decoded)", True))
    styles = {"x": "-", "w": "--", "g": ":"}
    for ax, (key, title, log) in zip(axes.reshape(-1), panels, strict=True):
        for name, rows in sorted(series.items()):
            a = np.asarray(rows, np.float64)
            y = a[:, _COL[key]]
            if log:
                y = np.where(y > 0, y, np.nan)
            ax.plot(a[:, 0], y, styles[name.rsplit("/", 1)[1]], linewidth=0.8, label=name)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("step")
        if log:
            ax.set_yscale("log")
    fig.suptitle(f"{mode}: quantization per layer (solid x, dashed w, dotted g)", fontsize=10)
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="center left",
               bbox_to_anchor=(0.86, 0.5), fontsize=6)
    fig.tight_layout(rect=(0, 0, 0.85, 0.96))
    fig.savefig(path, dpi=80)
    plt.close(fig)


def what_if(operands: dict[str, dict[str, np.ndarray]]) -> list[dict[str, Any]]:
    """The same tensors under every recipe and profile (TRN-QNT-005): for each layer's
    activation, weight and gradient, the role's operand of each GEMM recipe (fprop A for
    x, fprop B for w, dgrad A for g), with each profile that ships it. fp8-delayed is left
    out: its scale comes from the amax history of earlier steps, not from the tensor."""
    rows = []
    side = {"x": ("fprop", 0), "w": ("fprop", 1), "g": ("dgrad", 0)}
    for layer, ops in sorted(operands.items()):
        for role, arr in ops.items():
            for name, rec in GEMM_RECIPES.items():
                op = rec.operand(*side[role])
                if op.recipe == "fp8_delayed":
                    continue
                for prof in RECIPE_PROFILES:
                    if op.recipe not in recipes.PROFILES[prof].recipes:
                        continue
                    kw: dict[str, Any] = dict(profile=prof, tile=op.tile, **op.options())
                    if op.stochastic:
                        kw.update(rounding="stochastic", seed=0)
                    q = recipes.quantize(arr, op.recipe, **kw)
                    rows.append({"layer": layer, "role": role, "mode": name, "profile": prof,
                                 **operand_stats(arr, q)})
    return rows


def what_if_lines(rows: list[dict[str, Any]], step: int) -> list[str]:
    """A markdown table: one row per (layer, role), one column per (mode, profile)."""
    if not rows:
        return []
    cols = sorted({(r["mode"], r["profile"]) for r in rows},
                  key=lambda c: (list(GEMM_RECIPES).index(c[0]), c[1]))
    cells: dict[tuple[str, str], dict[tuple[str, str], str]] = {}
    for r in rows:
        cells.setdefault((r["layer"], r["role"]), {})[(r["mode"], r["profile"])] = (
            f"{r['rel_mse']:.1e} / {r['underflow_pct']:.1f} / {r['saturation_pct']:.1f}")
    head = "| layer | tensor | " + " | ".join(f"{m} ({p})" for m, p in cols) + " |"
    lines = [f"What-if at step {step}: each tensor quantized under every recipe and profile "
             "(relative MSE / % underflow to 0 / % clipped).", "", head,
             "|---|---|" + "---|" * len(cols)]
    for (layer, role), c in cells.items():
        lines.append(f"| {layer} | {ROLE_NAMES[role]} | "
                     + " | ".join(c.get(k, "-") for k in cols) + " |")
    return lines
