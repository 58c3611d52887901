"""The import graph: one direction through the layers of docs/architecture.md, one
documented exception (tensor -> functional, a lazy hook for the operators), and no
module importing another's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
#: (source folder, import name) of the package; the repository keeps the backends beside
#: ampref/ and setuptools maps them to ampref.backends
SOURCES = ((ROOT / "ampref", "ampref"), (ROOT / "backends", "ampref.backends"))

#: layer of each module (prefix match, longest first): imports go to the same or a lower
#: layer only; docs/architecture.md draws the same table
LAYERS = {
    "ampref.checks": 0, "ampref.formats": 0, "ampref.rounding": 0, "ampref.srhash": 0,
    "ampref.atomicio": 0, "ampref.rng": 0, "ampref.evidenceplugin": 0,
    "ampref.castkernel": 1, "ampref.cast": 1, "ampref.exactsum": 1, "ampref.gpus": 1,
    "ampref.tensorcore": 2, "ampref.blockmma": 2, "ampref.mfma": 2, "ampref.accumulation": 2,
    "ampref.certified": 2,
    "ampref.recipes": 3, "ampref.verify": 2, "ampref.testing": 2,
    "ampref.scaling": 3, "ampref.audit": 3, "ampref.lossscaler": 3, "ampref.policy": 3,
    "ampref.autocast_mode": 3, "ampref.campaign": 3,
    "ampref.backends": 4,
    "ampref.tensor": 5,
    "ampref.functional": 6,
    "ampref.nn": 7, "ampref.optim": 7, "ampref.amp": 7,
    "ampref.stats": 8, "ampref.trainconfig": 8, "ampref.corpus": 8, "ampref.faults": 8,
    "ampref.run": 8, "ampref.checkpoint": 8, "ampref.quantreport": 8,
    "ampref.report": 9, "ampref.evidence": 9, "ampref.certreport": 9,
    "ampref.train": 10,
    "ampref.cli": 11, "ampref.__main__": 11,
    "ampref": 12,  # the package's __init__: the public names, above everything
}
#: the single allowed upward edge: Tensor's operators call ampref.functional through a
#: function-level import (tinygrad's pattern), so tensor.py loads before the ops
HOOK = ("ampref.tensor", "ampref.functional")


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


def _layer(name: str) -> int:
    for prefix in sorted(LAYERS, key=len, reverse=True):
        if name == prefix or name.startswith(prefix + "."):
            return LAYERS[prefix]
    raise AssertionError(f"module {name} has no layer in LAYERS (add it, and to architecture.md)")


def _graph() -> dict[str, list[tuple[str, bool, str]]]:
    mods = _modules()
    return {m: _imports(m, p, pkg, set(mods)) for m, (p, pkg) in mods.items()}


@pytest.mark.clause("API-ARC-001")
def test_every_import_goes_to_the_same_or_a_lower_layer_but_the_one_hook() -> None:
    upward = sorted({(m, t) for m, edges in _graph().items() for t, _, _ in edges
                     if _layer(t) > _layer(m)})
    assert upward == [HOOK]


@pytest.mark.clause("API-ARC-001")
def test_the_hook_is_a_function_level_import() -> None:
    edges = [(fn, a) for t, fn, a in _graph()[HOOK[0]] if t == HOOK[1]]
    assert edges and all(fn for fn, _ in edges)


@pytest.mark.clause("API-ARC-001")
def test_the_graph_without_the_hook_has_no_cycle() -> None:
    graph = {m: sorted({t for t, _, _ in e if (m, t) != HOOK}) for m, e in _graph().items()}
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
    private = sorted((m, t, a) for m, edges in _graph().items() for t, _, a in edges
                     if a.startswith("_") and not a.startswith("__"))
    assert private == []


@pytest.mark.clause("API-ARC-001")
def test_the_checker_sees_a_planted_cycle(tmp_path: Path) -> None:
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
