"""The qualification items of the evidence pack (specs/certify.md CRT-QUA-*): the
configuration index, verification cases and procedures read from the tests themselves,
deviations with their impact, problem reports, and the comparison of two packs.

DO-330 (tool qualification, section 10/11 data items) and ISO 26262-8 clause 11 ask for
the same kinds of items under different names: what the tool must do (tool operational
requirements: the spec clauses), how each requirement is verified (cases and procedures:
each test's purpose, inputs and oracle), the results, the exact configuration that
produced them, open problems and deviations, and a summary for sign-off. This module
builds each from the source tree and the run; nothing is typed in by hand.
"""

from __future__ import annotations

import ast
import hashlib
import re
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any

from .binding import package_digest

__all__ = ["SCHEMA", "VOLATILE", "case_id", "cases", "configuration", "deviations", "diff",
           "short_name", "stable"]

#: version of certify.json's layout; bumped when a key changes meaning
SCHEMA = "ampref-certify/3"
#: keys whose values legitimately differ between two runs of one commit on one machine
VOLATILE = frozenset({"generated", "seconds", "durations", "tail", "out"})
#: packages whose versions the configuration index records when installed
PACKAGES = ("numpy", "ml_dtypes", "scipy", "numba", "hypothesis", "pytest", "torch", "torchao",
            "jinja2", "markdown-it-py", "matplotlib", "dask", "distributed", "tqdm", "pypdf")

_DEVIATION = re.compile(r"^\*(?:Known ([^*\n]*) d|D)eviation([^*\n]*):\*(.*?)"
                        r"(?=\n\s*\n|\n\*\*[A-Z]|\n\*(?:Known|Deviation)|\Z)", re.S | re.M)
_IMPACT = re.compile(r"\*Impact:\*\s*(.*)\Z", re.S)


def _digest(paths: list[Path], root: Path) -> str:
    """One SHA-256 over the relative names and contents of ``paths`` (sorted)."""
    h = hashlib.sha256()
    for p in sorted(paths):
        h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _files(folder: Path, pattern: str = "*") -> list[Path]:
    return [p for p in folder.rglob(pattern)
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def _git(source: Path, *args: str) -> str:
    try:
        r = subprocess.run(["git", "-C", str(source), *args], capture_output=True, text=True,
                           timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def configuration(source: Path, package: Path) -> dict[str, Any]:
    """The configuration index: commit with a clean/dirty flag, digests of the package,
    specs, tests and recorded vectors, and the versions of every package that took part."""
    import platform

    commit = _git(source, "rev-parse", "HEAD") if (source / ".git").exists() else ""
    # untracked files count: a test or spec added but not committed changes the evidence
    dirty = bool(_git(source, "status", "--porcelain", "--untracked-files=normal")) if commit \
        else None
    checkout = package.parent
    tool_commit = _git(checkout, "rev-parse", "HEAD") if (checkout / ".git").exists() else ""
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return {
        "schema": SCHEMA, "commit": commit or "not a git checkout",
        "working_tree": "n/a" if dirty is None else ("dirty" if dirty else "clean"),
        "tool": {"commit": tool_commit or "an installed package (no checkout)",
                 "package_sha256": package_digest()},
        "sha256": {"package": package_digest(),
                   "specs": _digest(_files(source / "specs"), source),
                   "tests": _digest([p for p in _files(source / "tests")
                                     if "data" not in p.relative_to(source / "tests").parts],
                                    source),
                   "vectors": _digest(_files(source / "tests" / "data"), source)
                   if (source / "tests" / "data").is_dir() else "none"},
        "versions": versions}


def short_name(nodeid: str) -> str:
    """``tests/a/test_b.py::test_the_thing_works[x-1]`` -> ``the thing works [x-1]``."""
    name = nodeid.split("::")[-1]
    base, _, param = name.partition("[")
    words = base.removeprefix("test_").replace("_", " ")
    return f"{words} [{param}" if param else words


def _docstrings(path: Path) -> tuple[str, dict[str, str]]:
    """The module docstring and each test function's docstring (first paragraph)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (SyntaxError, UnicodeDecodeError):
        return "", {}
    first = (ast.get_docstring(tree) or "").split("\n\n")[0]
    funcs = {n.name: (ast.get_docstring(n) or "").split("\n\n")[0]
             for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
             and n.name.startswith("test")}
    return " ".join(first.split()), {k: " ".join(v.split()) for k, v in funcs.items()}


def cases(source: Path, items: dict[str, Any]) -> list[dict[str, Any]]:
    """Verification cases and procedures: one case per test function (its
    parametrizations counted together): its procedure (the test's docstring, else its
    name read as a sentence), the module's statement of inputs and oracle, the clauses it
    verifies and its outcomes in this run."""
    groups: dict[str, dict[str, Any]] = {}
    docs: dict[str, tuple[str, dict[str, str]]] = {}
    for nodeid, rec in sorted(items.items()):
        file, _, rest = nodeid.partition("::")
        func = rest.split("[")[0].split("::")[-1]
        key = f"{file}::{func}"
        if file not in docs:
            docs[file] = _docstrings(source / file)
        module_doc, funcs = docs[file]
        g = groups.setdefault(key, {
            "id": key, "name": short_name(key), "file": file,
            "procedure": funcs.get(func) or short_name(key).capitalize() + ".",
            "documented": bool(funcs.get(func)),
            "context": module_doc, "clauses": [], "outcomes": {}})
        g["clauses"] = sorted(set(g["clauses"]) | set(rec["clauses"]))
        g["outcomes"][rec["outcome"]] = g["outcomes"].get(rec["outcome"], 0) + 1
    for g in groups.values():
        g["case"] = case_id(g["id"])
    ids = [g["case"] for g in groups.values()]
    if len(set(ids)) != len(ids):  # 32 bits collided: longer IDs for this pack
        for g in groups.values():
            g["case"] = case_id(g["id"], 12)
    return list(groups.values())


def case_id(key: str, digits: int = 8) -> str:
    """A case's stable ID (CRT-CAS-001): ``VC-`` and the first hex digits of the SHA-256
    of ``file::function``, so adding, removing or reordering other tests renumbers
    nothing; moving the function to another file is a new case."""
    return f"VC-{hashlib.sha256(key.encode()).hexdigest()[:digits]}"


def deviations(source: Path) -> list[dict[str, str]]:
    """Every deviation block of the specs: a paragraph that starts with *Deviation (...):*
    or *Known ... deviation:*, the clause defined above it, its text and its impact (the
    paragraph's *Impact:* sentence: what a user of the tool must do about it)."""
    out = []
    for md in sorted((source / "specs").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        for m in _DEVIATION.finditer(text):
            before = re.findall(r"\*\*([A-Z]{2,4}-[A-Z0-9]{2,5}-\d{3})", text[:m.start()])
            body = m.group(3)
            imp = _IMPACT.search(body)
            out.append({"file": md.name, "clause": before[-1] if before else "",
                        "source": (m.group(1) or m.group(2)).strip(" ()"),
                        "text": " ".join(body[:imp.start()].split() if imp else body.split()),
                        "impact": " ".join(imp.group(1).split()) if imp else ""})
    return out


def stable(doc: Any) -> Any:
    """``doc`` without the values that differ between two runs of one configuration
    (timestamps, durations, output folders): what two packs are compared on."""
    if isinstance(doc, dict):
        return {k: stable(v) for k, v in doc.items() if k not in VOLATILE}
    if isinstance(doc, list):
        return [stable(v) for v in doc]
    return doc


def diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed between two packs: status, configuration, clause statuses and texts,
    test outcomes, certificates, deviations (one line each; empty when equal)."""
    out: list[str] = []
    for key in ("status", "level", "strides"):
        if old.get(key) != new.get(key):
            out.append(f"{key}: {old.get(key)} -> {new.get(key)}")
    oc, nc = old.get("config", {}), new.get("config", {})
    for k in sorted(set(oc) | set(nc)):
        if k in ("sha256", "versions", "chunks", "tool"):
            for sub in sorted(set(oc.get(k, {})) | set(nc.get(k, {}))):
                a, b = oc.get(k, {}).get(sub), nc.get(k, {}).get(sub)
                if a != b:
                    out.append(f"config {k}.{sub}: {a} -> {b}")
        elif oc.get(k) != nc.get(k):
            out.append(f"config {k}: {oc.get(k)} -> {nc.get(k)}")
    out += _keyed("clause", old.get("clauses", []), new.get("clauses", []), "id",
                  ("status", "text"))
    out += _keyed("test", _tests(old), _tests(new), "id", ("outcome",))
    out += _keyed("certificate", old.get("certs", []), new.get("certs", []), "key",
                  ("ok", "checked", "mismatches", "peer_mismatches"))
    out += _keyed("deviation", old.get("deviations", []), new.get("deviations", []), "text",
                  ("impact", "clause"))
    return out


def _tests(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"id": k, "outcome": v["outcome"]}
            for k, v in doc.get("tests", {}).get("items", {}).items()]


def _keyed(what: str, old: list[dict[str, Any]], new: list[dict[str, Any]], key: str,
           fields: tuple[str, ...]) -> list[str]:
    a, b = {r[key]: r for r in old}, {r[key]: r for r in new}
    out = [f"{what} added: {k}" for k in sorted(set(b) - set(a))]
    out += [f"{what} removed: {k}" for k in sorted(set(a) - set(b))]
    for k in sorted(set(a) & set(b)):
        for f in fields:
            if a[k].get(f) != b[k].get(f):
                out.append(f"{what} {k} {f}: {_short(a[k].get(f))} -> {_short(b[k].get(f))}")
    return out


def _short(v: Any) -> str:
    s = str(v)
    return s if len(s) <= 60 else s[:57] + "..."
