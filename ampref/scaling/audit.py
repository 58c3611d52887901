"""The loss scaler's audit log: one :class:`~ampref.scaling.machine.ScaleEvent` per update, its
export (CSV or JSON, written atomically) and a one-line summary (SCL-AUD-*)."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
from typing import Any

from ampref.common.atomicio import atomic_write
from .machine import ScaleEvent

__all__ = ["AuditLog"]


class AuditLog:
    """Every update of one scaler, in order."""

    def __init__(self, profile: str) -> None:
        self.profile = profile
        self.events: list[ScaleEvent] = []

    def append(self, ev: ScaleEvent) -> None:
        self.events.append(ev)

    def rows(self) -> list[dict[str, Any]]:
        """Every update as a dict, with ``applied`` (SCL-AUD-001)."""
        return [dataclasses.asdict(e) | {"applied": e.applied} for e in self.events]

    def skipped_steps(self) -> list[int]:
        return [e.step for e in self.events if e.found_inf]

    def export(self, path: str | os.PathLike[str], fmt: str | None = None) -> None:
        """Write the log as CSV or JSON (by ``fmt`` or the suffix), atomically: a failed
        write never destroys an existing file (SCL-AUD-002).

        Raises:
            ValueError: neither csv nor json.
            FileNotFoundError: the folder does not exist (named).
        """
        path = os.fspath(path)
        kind = fmt or ("json" if path.endswith(".json") else "csv" if path.endswith(".csv")
                       else None)
        if kind not in ("csv", "json"):
            raise ValueError(f"audit export format must be 'csv' or 'json', got {kind!r} for "
                             f"{path!r}")
        rows = self.rows()
        if kind == "json":
            text = json.dumps({"profile": self.profile, "events": rows}, indent=1)
        else:
            buf = io.StringIO()
            names = [f.name for f in dataclasses.fields(ScaleEvent)] + ["applied"]
            w = csv.DictWriter(buf, fieldnames=names)
            w.writeheader()
            w.writerows(rows)
            text = buf.getvalue()
        atomic_write(path, text)

    def summary(self, scale: float) -> str:
        """One line: updates, skipped steps, the scale's range and the actions."""
        ev = self.events
        skipped = self.skipped_steps()
        acts = {a: sum(e.action == a for e in ev) for a in ("grow", "backoff", "clamp", "skip")}
        first = ev[0].scale_before if ev else scale
        return (f"{self.profile} loss scaler: {len(ev)} updates, {len(skipped)} skipped "
                f"(steps {_ranges(skipped)}), scale {first:g} -> {scale:g}; "
                + ", ".join(f"{k} {v}" for k, v in acts.items()))


def _ranges(steps: list[int]) -> str:
    if not steps:
        return "none"
    out, start, prev = [], steps[0], steps[0]
    for s in steps[1:] + [None]:  # type: ignore[list-item]
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
        if s is not None:
            start = prev = s
    return ", ".join(out)
