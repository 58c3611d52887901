"""API-ARC-002: every dataclass of the package is keyword-only and frozen, except the
records that accumulate a run (listed here with the reason each must change)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
import pkgutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any

import numpy as np
import pytest

from paths import ROOT

TORCH = importlib.util.find_spec("torch") is not None
#: optional dependencies a module of the package may need (extras, or a GPU's packages)
OPTIONAL = {"cupy", "torch", "dask", "distributed", "matplotlib", "hypothesis"}

#: the mutable dataclasses and why each must change after it is made
MUTABLE = {
    "RunState": "the training loop appends each step's history to it",
    "QuantState": "the delayed-scaling state a quantized layer updates every step",
    "VerifyResult": "counts that chunks of a verification run merge into",
    "OpRecord": "a report's per-op counts, incremented as ops run",
}


def _flags(paths: list[Path], root: Path) -> dict[str, tuple[str, bool, bool]]:
    """Class name -> (where, frozen, kw_only) for every ``@dataclass`` in ``paths``."""
    found: dict[str, tuple[str, bool, bool]] = {}
    for p in paths:
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            for deco in node.decorator_list:
                call = deco if isinstance(deco, ast.Call) else None
                target = call.func if call else deco
                name = target.attr if isinstance(target, ast.Attribute) else \
                    getattr(target, "id", "")
                if name != "dataclass":
                    continue
                kw = {k.arg: k.value for k in (call.keywords if call else [])}
                on = {k: isinstance(v, ast.Constant) and v.value is True for k, v in kw.items()}
                found[node.name] = (f"{p.relative_to(root)}:{node.lineno}",
                                    on.get("frozen", False), on.get("kw_only", False))
    return found


def _violations(paths: list[Path], root: Path) -> list[str]:
    bad = []
    for name, (where, frozen, kw_only) in sorted(_flags(paths, root).items()):
        if not kw_only:
            bad.append(f"{where} {name}: not kw_only")
        if not frozen and name not in MUTABLE:
            bad.append(f"{where} {name}: not frozen")
    return bad


def _sources() -> list[Path]:
    return sorted((ROOT / "ampref").rglob("*.py")) + sorted((ROOT / "backends").glob("*.py"))


@pytest.mark.clause("API-ARC-002")
def test_every_dataclass_is_keyword_only_and_frozen_unless_it_accumulates_a_run() -> None:
    """API-ARC-002. Inputs: the source of every module of ampref/ and backends/. Expected:
    each @dataclass has kw_only=True, and frozen=True unless MUTABLE names it. Pass: no
    violation listed."""
    assert _violations(_sources(), ROOT) == []


@pytest.mark.clause("API-ARC-002")
def test_the_mutable_list_names_only_dataclasses_that_exist_and_are_mutable() -> None:
    """API-ARC-002. Inputs: MUTABLE and the scanned flags. Expected: each listed name is a
    dataclass of the package that is not frozen (a stale entry would excuse a future class
    of that name). Pass: equality of the two sets."""
    flags = _flags(_sources(), ROOT)
    assert {n for n, (_, frozen, _) in flags.items() if not frozen} == set(MUTABLE)


@pytest.mark.clause("API-ARC-002")
def test_the_checker_sees_a_mutable_row_and_a_positional_one(tmp_path: Path) -> None:
    """API-ARC-002. Inputs: a module with a plain @dataclass, a frozen positional one, a
    frozen keyword-only one and a mutable listed one. Expected: the first two reported
    (the plain one twice), the others accepted. Pass: the exact list."""
    (tmp_path / "m.py").write_text(
        "from dataclasses import dataclass\nimport dataclasses\n\n"
        "@dataclass\nclass Row:\n    a: int\n\n"
        "@dataclasses.dataclass(frozen=True)\nclass Pos:\n    a: int\n\n"
        "@dataclass(frozen=True, kw_only=True)\nclass Ok:\n    a: int\n\n"
        "@dataclass(kw_only=True)\nclass RunState:\n    a: int\n")
    assert _violations([tmp_path / "m.py"], tmp_path) == [
        "m.py:9 Pos: not kw_only", "m.py:5 Row: not kw_only", "m.py:5 Row: not frozen"]


def _editable(value: Any, where: str, seen: set[int]) -> list[str]:
    """Paths inside ``value`` (a registry row) to a container that can be edited in
    place: a list, dict, set, bytearray or writeable array, at any depth of frozen
    dataclasses, tuples and read-only mappings."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    if isinstance(value, (list, dict, set, bytearray)):
        return [f"{where} is a {type(value).__name__}"]
    if isinstance(value, np.ndarray):
        return [f"{where} is a writeable array"] if value.flags.writeable else []
    if isinstance(value, MappingProxyType):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (tuple, frozenset)):
        items = enumerate(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type) \
            and type(value).__name__ not in MUTABLE:
        items = ((f.name, getattr(value, f.name)) for f in dataclasses.fields(value))
    else:
        return []
    return [bad for k, v in items for bad in _editable(v, f"{where}[{k!r}]", seen)]


def _rows(module: ModuleType) -> Iterator[tuple[str, Any]]:
    """Each frozen dataclass instance a module holds at its top level, alone or as a
    value of a top-level dict, mapping or tuple (a registry)."""
    def frozen(v: Any) -> bool:
        return dataclasses.is_dataclass(v) and not isinstance(v, type) and \
            type(v).__dataclass_params__.frozen  # type: ignore[attr-defined]
    for name, val in vars(module).items():
        where = f"{module.__name__}.{name}"
        if frozen(val):
            yield where, val
        elif isinstance(val, (dict, MappingProxyType)):
            yield from ((f"{where}[{k!r}]", v) for k, v in val.items() if frozen(v))
        elif isinstance(val, tuple):
            yield from ((f"{where}[{i}]", v) for i, v in enumerate(val) if frozen(v))


def _editable_rows(modules: Iterable[ModuleType]) -> list[str]:
    return sorted({bad for m in modules for where, row in _rows(m)
                   for bad in _editable(row, where, set())})


def _package_modules() -> list[ModuleType]:
    """Every module of the installed package that imports here: one that needs an
    optional dependency not installed (CuPy for ``backends.cupy_backend``, torch for the
    bridge) is left out; any other import error fails."""
    import ampref
    mods = []
    for m in pkgutil.walk_packages(ampref.__path__, "ampref."):
        if m.name.endswith("__main__") or (not TORCH and m.name.startswith("ampref.torch")):
            continue
        try:
            mods.append(importlib.import_module(m.name))
        except ModuleNotFoundError as e:
            if e.name is None or e.name.split(".")[0] not in OPTIONAL:
                raise
    return mods


@pytest.mark.clause("API-ARC-002")
def test_registry_rows_cannot_be_edited_in_place_at_any_depth() -> None:
    """API-ARC-002. Inputs: every module of the package (the torch bridge where torch is
    installed); each frozen dataclass they hold at top level or in a top-level dict,
    mapping or tuple. Expected: no field of such a row, at any depth, is a list, dict,
    set, bytearray or writeable array (a frozen row whose dict can be edited would let
    one caller change a profile or GPU for every other). Pass: the list is empty."""
    assert _editable_rows(_package_modules()) == []


@pytest.mark.clause("API-ARC-002")
def test_the_row_scanner_finds_a_dict_a_nested_list_and_a_writeable_array() -> None:
    """API-ARC-002. Inputs: a module holding a registry of frozen rows: one with a dict
    field, one with a tuple holding a list, one with a writeable array, one with a
    read-only mapping, a read-only array and a tuple of ints. Expected: exactly the first
    three reported, by path. Pass: the exact list."""
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class Row:
        v: Any

    ro = np.zeros(2)
    ro.flags.writeable = False
    m = ModuleType("m")
    m.REG = {"d": Row(v={"a": 1}), "l": Row(v=(1, [2])),  # type: ignore[attr-defined]
             "w": Row(v=np.zeros(2)), "ok": Row(v=(MappingProxyType({"a": 1}), ro, (1, 2)))}
    assert _editable_rows([m]) == ["m.REG['d']['v'] is a dict",
                                   "m.REG['l']['v'][1] is a list",
                                   "m.REG['w']['v'] is a writeable array"]
