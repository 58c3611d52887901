"""The import graph between the rooms of docs/architecture.md: every room imports only
rooms below it, four documented hooks inside the engine (function-level imports: the
tensor's operators and methods call the ops, an integer tensor's cast makes a float
tensor), no cycles, no module importing another's private names; and
the top of ampref/ is exactly the rooms the architecture table lists."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import ampref
from paths import ROOT

#: source folder and import name of the package; the repository keeps the backends beside
#: ampref/ and setuptools maps them to ampref.backends
SOURCES = ((ROOT / "ampref", "ampref"), (ROOT / "backends", "ampref.backends"))

#: layer of each room: a module imports modules of its own room or of rooms in lower
#: layers only; rooms of one layer do not import each other. docs/architecture.md draws
#: the same table.
ROOMS = {
    "ampref.common": 0, "ampref.kernels": 0,
    "ampref.formats": 1,
    "ampref.accumulation": 2,
    "ampref.recipes": 3, "ampref.scaling": 3, "ampref.policy": 3,
    "ampref.backends": 4, "ampref.distributed": 4,
    "ampref.engine": 5,
    "ampref.testing": 5,
    "ampref.training": 6, "ampref.certify": 6, "ampref.torch": 6,
    "ampref.cli": 7, "ampref.__main__": 8,
    "ampref": 9,  # the package's __init__: the public names, above everything
}
#: the single edge against the order inside a room: Tensor's operators call the engine's
#: functional ops through a function-level import (tinygrad's pattern), so tensor.py
#: loads before the ops
#: the upward imports inside the engine, each function-level: Tensor's operators and its
#: torch-named methods call the ops, an integer tensor's cast makes a float tensor, and
#: the 0.1 name ampref.engine.tensor.tensor resolves to its new module
HOOKS = {("ampref.engine.tensor", "ampref.engine.functional"),
         ("ampref.engine.viewmethods", "ampref.engine.functional"),
         ("ampref.engine.indices", "ampref.engine.creation"),
         ("ampref.engine.tensor", "ampref.engine.creation"),
         ("ampref.engine.methods", "ampref.engine.placement"),
         ("ampref.engine.methods", "ampref.engine.device"),
         ("ampref.engine.indices", "ampref.engine.placement"),
         ("ampref.engine.floatstores", "ampref.engine.tensor"),
         ("ampref.engine.floatstores", "ampref.engine.functional.core"),
         ("ampref.engine.floatstores", "ampref.engine.placement"),
         ("ampref.engine.indices", "ampref.engine.device")}


def _modules() -> dict[str, tuple[Path, bool]]:
    mods = {}
    for folder, name in SOURCES:
        for f in folder.rglob("*.py"):
            parts = [p for p in f.relative_to(folder).with_suffix("").parts if p != "__init__"]
            mods[".".join([name, *parts])] = (f, f.name == "__init__.py")
    return mods


def _imports(name: str, path: Path, is_pkg: bool, known: set[str]) -> list[tuple[str, bool, str]]:
    """(target module, imported inside a function, imported name) for every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if is_pkg else name.rsplit(".", 1)[0]
    out = []
    for fn_level, node in _walk(tree, False):
        if isinstance(node, ast.ImportFrom):
            base = pkg.split(".")[:len(pkg.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else [])) if node.level \
                else node.module or ""
            for a in node.names:
                sub = f"{target}.{a.name}"
                out.append((sub if sub in known else target, fn_level, a.name))
        elif isinstance(node, ast.Import):
            out += [(a.name, fn_level, a.name) for a in node.names]
    if name == "ampref.backends":  # the registry names its modules as strings
        registry = [n for n in ast.walk(tree) if isinstance(n, ast.Constant)
                    and isinstance(n.value, str) and n.value.startswith("ampref.backends.")]
        out += [(str(n.value), True, "") for n in registry]
    return [(t, f, a) for t, f, a in out if t in known and t != name]


def _walk(node: ast.AST, in_fn: bool):  # type: ignore[no-untyped-def]
    for child in ast.iter_child_nodes(node):
        inner = in_fn or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
        yield inner, child
        yield from _walk(child, inner)


def _room(name: str) -> str:
    for prefix in sorted(ROOMS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return prefix
    raise AssertionError(f"module {name} is in no room of ROOMS (add it, and to "
                         "architecture.md)")


def _allowed(source: str, target: str) -> bool:
    """Same room, or a room of a lower layer."""
    a, b = _room(source), _room(target)
    return a == b or ROOMS[b] < ROOMS[a]


def _graph() -> dict[str, list[tuple[str, bool, str]]]:
    mods = _modules()
    return {m: _imports(m, p, pkg, set(mods)) for m, (p, pkg) in mods.items()}


@pytest.mark.clause("API-ARC-001")
def test_every_import_stays_in_its_room_or_goes_to_a_lower_one() -> None:
    """Inputs: every import edge of ampref/ and backends/ (parsed with ast). Expected: each
    stays in its room or goes to a lower room. Pass: no offending edge."""
    wrong = sorted({(m, t) for m, edges in _graph().items() for t, _, _ in edges
                    if not _allowed(m, t)})
    assert wrong == []


@pytest.mark.clause("API-ARC-001")
def test_the_room_checker_refuses_an_upward_and_a_sideways_import() -> None:
    """Inputs: formats -> engine, scaling -> policy, engine.nn -> formats, engine.tensor ->
    functional.core. Expected: the first two refused, the last two allowed. Pass: each."""
    assert not _allowed("ampref.formats.cast", "ampref.engine.tensor")
    assert not _allowed("ampref.scaling.scaler", "ampref.policy.autocast")
    assert _allowed("ampref.engine.nn.modules", "ampref.formats.table")
    assert _allowed("ampref.engine.tensor", "ampref.engine.functional.core")


@pytest.mark.clause("API-ARC-001")
@pytest.mark.parametrize("hook", sorted(HOOKS), ids=lambda h: f"{h[0]}->{h[1]}")
def test_each_hook_is_a_function_level_import(hook: tuple[str, str]) -> None:
    """Inputs: each documented hook edge inside the engine. Expected: it exists and every
    such import sits inside a function. Pass: both."""
    edges = [(fn, a) for t, fn, a in _graph()[hook[0]] if t == hook[1]]
    assert edges and all(fn for fn, _ in edges)


@pytest.mark.clause("API-ARC-001")
def test_the_graph_without_the_hook_has_no_cycle() -> None:
    """Inputs: the import graph without the documented hooks. Expected: no cycle (depth-
    first search). Pass: no back edge."""
    graph = {m: sorted({t for t, _, _ in e if (m, t) not in HOOKS}) for m, e in _graph().items()}
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in graph[m]:
            assert state.get(t) != 1, "import cycle: " + " -> ".join(path + [m, t])
            if t not in state:
                visit(t, path + [m])
        state[m] = 2

    for m in graph:
        if m not in state:
            visit(m, [])


@pytest.mark.clause("API-ARC-001")
def test_no_module_imports_another_modules_private_names() -> None:
    """Inputs: every imported name of every edge. Expected: none starts with a single
    underscore. Pass: empty list."""
    private = sorted((m, t, a) for m, edges in _graph().items() for t, _, a in edges
                     if a.startswith("_") and not a.startswith("__"))
    assert private == []


@pytest.mark.clause("API-ARC-001")
def test_the_checker_sees_a_planted_cycle(tmp_path: Path) -> None:
    """Inputs: a two-module package importing itself in a circle, one import of a private
    name. Expected: the graph builder reports both edges and the private name. Pass: all
    three present."""
    # the graph builder on a two-module package that imports itself in a circle
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import thing\n")
    (pkg / "b.py").write_text("from . import a\nfrom .a import _secret\n")
    known = {"pkg", "pkg.a", "pkg.b"}
    a = _imports("pkg.a", pkg / "a.py", False, known)
    b = _imports("pkg.b", pkg / "b.py", False, known)
    assert ("pkg.b", False, "thing") in a and ("pkg.a", False, "a") in b
    assert ("pkg.a", False, "_secret") in b


def _long_functions(paths: list[Path], root: Path = ROOT, limit: int = 40) -> list[str]:
    """Functions whose code (docstring excluded) runs past ``limit`` lines without a
    ``# why long:`` comment."""
    found = []
    for p in paths:
        src = p.read_text()
        for node in ast.walk(ast.parse(src)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            first = node.body[0]
            has_doc = (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                       and isinstance(first.value.value, str))
            start = (first.end_lineno or first.lineno) + 1 if has_doc and len(node.body) > 1 \
                else first.lineno
            end = node.end_lineno or node.lineno
            text = "\n".join(src.splitlines()[node.lineno - 1:end])
            if end - start + 1 > limit and "# why long:" not in text:
                found.append(f"{p.relative_to(root)}:{node.lineno} {node.name} "
                             f"({end - start + 1} lines)")
    return found


def test_functions_stay_under_40_lines_unless_a_comment_says_why() -> None:
    paths = sorted((ROOT / "ampref").rglob("*.py")) + sorted((ROOT / "backends").glob("*.py"))
    assert _long_functions(paths) == []


def test_the_length_checker_sees_a_long_function_and_accepts_a_stated_reason(
        tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(41))
    (tmp_path / "m.py").write_text(f'def f() -> None:\n    """Doc."""\n{body}\n')
    (tmp_path / "ok.py").write_text(f"def g() -> None:\n    # why long: a test\n{body}\n")
    found = _long_functions([tmp_path / "m.py", tmp_path / "ok.py"], tmp_path)
    assert found == ["m.py:1 f (41 lines)"]


#: what the top of ampref/ holds: the rooms and the four top-level modules
TOP = {"__init__.py", "__main__.py", "cli.py", "testing", "common", "kernels", "formats",
       "accumulation", "recipes", "scaling", "policy", "engine", "training", "certify",
       "torch", "distributed"}


@pytest.mark.clause("API-ARC-001")
def test_the_top_of_the_package_is_the_rooms_of_the_architecture_table() -> None:
    """Inputs: the entries of ampref/ and docs/architecture.md's tree. Expected: the
    entries are the known rooms and each has its line in the tree. Pass: equal set, none
    missing."""
    entries = {p.name for p in (ROOT / "ampref").iterdir() if p.name != "__pycache__"}
    assert entries == TOP
    table = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rooms = sorted(n for n in TOP if "." not in n) + ["backends"]
    missing = [r for r in rooms if not re.search(rf"^\s*{r}/\s+\S", table, re.M)]
    assert missing == [], f"rooms without their line in docs/architecture.md's tree: {missing}"


@pytest.mark.clause("API-ARC-001")
def test_every_room_says_what_it_is_for_and_what_it_may_import() -> None:
    """Inputs: each room's __init__.py docstring. Expected: an 'Imports:' line. Pass:
    present in every room."""
    inits = [ROOT / "ampref" / n / "__init__.py" for n in TOP if "." not in n]
    inits.append(ROOT / "backends" / "__init__.py")
    for init in inits:
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        assert "Imports:" in doc, f"{init} does not say what the room may import"


def test_modules_stay_under_400_lines() -> None:
    paths = sorted((ROOT / "ampref").rglob("*.py")) + sorted((ROOT / "backends").glob("*.py"))
    long = [f"{p.relative_to(ROOT)} ({n})" for p in paths
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400]
    assert long == []


#: the module paths the README and docs name; they must import as they always did
DOCUMENTED = ("ampref.scaling", "ampref.tensorcore", "ampref.accumulation", "ampref.recipes",
              "ampref.functional", "ampref.nn", "ampref.optim", "ampref.amp",
              "ampref.testing", "ampref.backends")


@pytest.mark.clause("API-ARC-001")
@pytest.mark.parametrize("path", DOCUMENTED)
def test_every_documented_module_path_imports(path: str) -> None:
    """Inputs: each documented module path (ampref.scaling, ampref.tensorcore, ...).
    Expected: it imports and is the package attribute of that name. Pass: identical
    objects."""
    module = importlib.import_module(path)
    assert getattr(ampref, path.split(".")[1]) is module


@pytest.mark.clause("API-ARC-001")
@pytest.mark.parametrize("old", sorted(ampref.OLD_PATHS))
def test_an_old_flat_module_path_is_the_very_module_of_its_new_room(old: str) -> None:
    """Inputs: each 0.1 flat module path. Expected: importing it gives the module of its
    new room. Pass: identical objects."""
    new = importlib.import_module(f"ampref.{ampref.OLD_PATHS[old]}")
    assert importlib.import_module(f"ampref.{old}") is new


#: old names the package binds to something else today (the function ampref.tensor)
SHADOWED = {"tensor"}


@pytest.mark.clause("API-ARC-001")
@pytest.mark.parametrize("old", sorted(set(ampref.OLD_PATHS) - SHADOWED))
def test_an_old_module_path_works_as_user_code_writes_it(old: str) -> None:
    """Input: a fresh interpreter running ``import ampref.<old>`` then reading a public
    name through ``ampref.<old>.<name>`` (the dotted attribute user code writes).
    Expected: the name is the new module's. Pass: the subprocess exits 0."""
    import subprocess
    import sys

    new = importlib.import_module(f"ampref.{ampref.OLD_PATHS[old]}")
    names = getattr(new, "__all__", None) or [n for n in vars(new) if not n.startswith("_")]
    code = (f"import ampref.{old}\nimport ampref.{ampref.OLD_PATHS[old]} as new\n"
            f"assert ampref.{old}.{names[0]} is new.{names[0]}\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-800:]


def test_old_paths_reach_submodules_without_a_second_copy() -> None:
    import ampref.nn.utils  # noqa: F401 - the old spelling, through the path finder
    from ampref.engine.nn import utils

    assert importlib.import_module("ampref.nn.utils") is utils
    assert importlib.import_module("ampref.functional.core") is importlib.import_module(
        "ampref.engine.functional.core")


def test_names_users_imported_from_old_modules_are_the_same_objects() -> None:
    from ampref.lossscaler import LossScaler
    from ampref.scaling import PROFILES, transition
    from ampref.scaling.machine import transition as machine_transition
    from ampref.scaling.profiles import PROFILES as profile_rows

    assert LossScaler is ampref.LossScaler
    assert PROFILES is profile_rows and transition is machine_transition


def test_importing_an_old_path_never_rebinds_a_public_name() -> None:
    import ampref.tensor  # noqa: F401 - the old module path of ampref.engine.tensor

    assert callable(ampref.tensor) and ampref.tensor is ampref.engine.tensor.tensor
