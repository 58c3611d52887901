"""What emulate and shadow saw, per module path and aten op: calls, elements, whether
ampref computed it, and (shadow) how torch's result compared with ampref's.

Rows are ranked hazard first: ops that turned finite inputs into inf/NaN, then by the
largest distance in ulps of the output format, then by the share of differing
elements, so a planted precision hazard heads the table.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from ampref.common.atomicio import atomic_write

__all__ = ["OpRecord", "Report"]


@dataclass(kw_only=True)
class OpRecord:
    """One (module path, aten op) pair."""

    module: str
    op: str
    calls: int = 0
    elements: int = 0
    #: False where torch computed the op (``fallback="torch"``, or shadow without a
    #: reference for it)
    emulated: bool = True
    #: shadow: output elements whose bits differ from ampref's
    mismatches: int = 0
    #: shadow: largest distance in ulps of the output format (inf/NaN disagreements count
    #: as a distance of 2^31)
    max_ulps: int = 0
    #: outputs that are inf/NaN where every input was finite (overflow, 0/0, log(0)) and
    #: the call did not ask for them: hazards
    nonfinite_from_finite: int = 0
    #: inf/NaN the call asked for (masked_fill with -inf, log of a constant's zeros):
    #: masks, kept out of the hazard ranking
    intended_nonfinite: int = 0
    #: shadow: largest |torch - ampref| / |ampref| over differing finite result elements
    max_rel: float = 0.0
    #: shadow: the same for outputs that are saved statistics (layer norm's mean and
    #: rstd, attention's logsumexp), which are not measured in ulps
    saved_max_rel: float = 0.0
    #: shadow: the worst differing element (largest ulps): flat index, output index,
    #: dtype, torch's and ampref's values in hex and decimal, ulps, relative error, and
    #: the inputs at that index where they are elementwise
    first: dict[str, Any] = field(default_factory=dict)
    #: why torch computed it (fallback reason), or the clause where ampref's definition
    #: and torch's kernel round differently on purpose
    note: str = ""
    #: emulate with a recipe: the layer's quantization (recipe, profile, GEMMs)
    quant: dict[str, Any] = field(default_factory=dict)

    def hazard(self) -> tuple[int, int, float]:
        share = self.mismatches / self.elements if self.elements else 0.0
        return (self.nonfinite_from_finite, self.max_ulps, share)


class Report:
    """Records of one emulate or shadow region; see :meth:`table`, :meth:`to_json` and
    :meth:`plot`."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.records: dict[tuple[str, str], OpRecord] = {}

    def record(self, module: str, op: str) -> OpRecord:
        key = (module, op)
        if key not in self.records:
            self.records[key] = OpRecord(module=module, op=op)
        return self.records[key]

    def rows(self) -> list[OpRecord]:
        """Hazards first (see the module docstring), then by module and op."""
        return sorted(self.records.values(),
                      key=lambda r: (tuple(-v for v in r.hazard()), r.module, r.op))

    def not_emulated(self) -> list[OpRecord]:
        return [r for r in self.rows() if not r.emulated]

    def table(self, limit: int | None = None) -> str:
        """A markdown table. shadow: hazards first, with the measures of each row;
        emulate: ops torch computed first (not emulated), then hazards, then the rest."""
        if self.kind == "shadow":
            head = ("| module | op | calls | elements | emulated | mismatches | max ulps | "
                    "max rel | inf/NaN from finite | masks | worst (torch / ampref) | note |\n"
                    "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|")
            rows = self.rows()
        else:
            head = ("| module | op | calls | elements | emulated | inf/NaN from finite | masks "
                    "| note |\n|---|---|---:|---:|---|---:|---:|---|")
            rows = sorted(self.rows(), key=lambda r: r.emulated)  # stable: hazards next
        lines = [head]
        for r in rows[:limit]:
            done = "yes" if r.emulated else "no (torch)"
            note = r.note or (f"{r.quant.get('recipe')} ({r.quant.get('profile')})"
                              if r.quant else "")
            if self.kind == "shadow":
                worst = (f"{r.first.get('torch', '')} / {r.first.get('ampref', '')}"
                         if r.first else "")
                lines.append(f"| {r.module} | {r.op} | {r.calls} | {r.elements} | {done} | "
                             f"{r.mismatches} | {r.max_ulps} | {r.max_rel:.2e} | "
                             f"{r.nonfinite_from_finite} | {r.intended_nonfinite} | {worst} | "
                             f"{note} |")
            else:
                lines.append(f"| {r.module} | {r.op} | {r.calls} | {r.elements} | {done} | "
                             f"{r.nonfinite_from_finite} | {r.intended_nonfinite} | {note} |")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "ops": [asdict(r) for r in self.rows()]}

    def to_json(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_dict` as JSON, atomically (a failed write keeps the old file)."""
        atomic_write(str(path), json.dumps(self.to_dict(), indent=1, default=str) + "\n")

    def plot(self, path: str | os.PathLike[str], limit: int = 20) -> None:
        """Bar charts of the share of differing elements and the max ulps per op
        (matplotlib, the ``plot`` extra).

        Raises:
            ValueError: matplotlib is not installed.
        """
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ValueError("Report.plot needs matplotlib (pip install ampref[plot])") from e
        rows = self.rows()[:limit][::-1]
        labels = [f"{r.module}:{r.op}" for r in rows]
        fig, axes = plt.subplots(1, 2, figsize=(11, 0.35 * len(rows) + 1.5), sharey=True)
        axes[0].barh(labels, [r.mismatches / max(r.elements, 1) for r in rows])
        axes[0].set_xlabel("share of elements differing from ampref")
        axes[1].barh(labels, [max(r.max_ulps, 0) for r in rows])
        axes[1].set_xscale("symlog")
        axes[1].set_xlabel("max distance (ulps of the output format)")
        fig.suptitle(f"ampref.torch.{self.kind}: per-op agreement")
        fig.tight_layout()
        tmp = f"{path}.tmp.png"
        fig.savefig(tmp, dpi=110)
        plt.close(fig)
        os.replace(tmp, path)
