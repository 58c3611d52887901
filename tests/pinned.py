"""Registry rows against the hand-transcribed values of tests/data/pinned_rows.toml.

Every registry row must have a pinned entry and every pinned entry a row; every pinned
field must equal the row's value. The table is read from the cited sources, not from
ampref, so a one-line change to a row fails here with the field, both values and the
source to re-read."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from paths import DATA

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PINNED: dict[str, dict[str, dict[str, Any]]] = tomllib.loads(
    (DATA / "pinned_rows.toml").read_text())


def _field(row: Any, path: str) -> Any:
    value = row
    for part in path.split("."):
        value = value[part] if isinstance(value, Mapping) else getattr(value, part)
    return value


def _plain(value: Any) -> Any:
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    return value


def mismatches(section: str, registry: dict[str, Any]) -> list[str]:
    """Every difference between ``registry`` (name -> row) and its pinned section."""
    pinned = PINNED[section]
    problems = [f"{section}: row {n!r} has no pinned entry (pin it from its source)"
                for n in registry if n not in pinned]
    problems += [f"{section}: pinned row {n!r} is not in the registry" for n in pinned
                 if n not in registry]
    for name, fields in pinned.items():
        if name not in registry:
            continue
        for path, want in fields.items():
            if path == "source":
                continue
            try:
                got = _plain(_field(registry[name], path))
            except (AttributeError, KeyError) as exc:
                problems.append(f"{section}.{name}.{path}: not on the row ({exc!r})")
                continue
            if got != want or type(got) is not type(want) and not (
                    isinstance(got, (int, float)) and isinstance(want, (int, float))
                    and not isinstance(got, bool) and not isinstance(want, bool)):
                problems.append(f"{section}.{name}.{path}: row has {got!r}, the source "
                                f"({fields['source']}) says {want!r}")
    return problems
