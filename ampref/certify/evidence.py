"""Collect the evidence of ``ampref certify`` (specs/certify.md CRT-RPT-*): what the tool
is, what it claims (the spec clauses), how each claim was verified (the test suite, run
now), the exhaustive certificates, the conformance vectors, the documented deviations and
a determinism check. Every number comes from a run made now or from imported result
files, never from constants.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from . import campaign
from .binding import package_files

__all__ = ["CLAUSE", "STATUSES", "find_source", "identification", "spec_clauses", "run_tests",
           "clause_status", "conformance", "determinism", "level_certificates"]

CLAUSE = re.compile(r"\b([A-Z]{2,4}-[A-Z0-9]{2,5}-\d{3})\b")
# a clause is *defined* where its bold ID opens a line (or a list item); a bold ID inside
# another clause's text is a reference, not a definition
_BOLD = re.compile(r"^(?:[-*] )?\*\*([A-Z]{2,4}-[A-Z0-9]{2,5}-\d{3})\b(.*?)(?=^(?:[-*] )?\*\*"
                   r"[A-Z]{2,4}-[A-Z0-9]{2,5}-\d{3}\b|\n\s*\n|\n#|\Z)", re.S | re.M)
#: the statement of section 1, with the clauses that guarantee it
INDEPENDENCE = ("Reference results do not depend on BLAS, threads or the machine: every op "
                "is deterministic and rounds exact results once (ENG-MM-001, ENG-RED-001, "
                "TRN-DAT-001); the determinism section below checks it on this machine.")


#: the installed ``ampref`` package folder (this module is ampref/certify/evidence.py)
PACKAGE = Path(__file__).resolve().parents[1]


def find_source(given: str | Path | None) -> Path:
    """The folder with ``specs/`` and ``tests/``: ``given``, else the checkout this
    package runs from.

    Raises:
        ValueError: no such folder (an installed wheel has no tests: pass --source).
    """
    root = Path(given) if given is not None else PACKAGE.parent
    if not (root / "specs").is_dir() or not (root / "tests").is_dir():
        raise ValueError(f"{str(root)!r} holds no specs/ and tests/; certify needs a checkout "
                         f"or unpacked sdist of ampref: pass --source DIR")
    return root


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def identification(source: Path) -> dict[str, Any]:
    """Section 1: version, commit, SHA-256 of every installed file, environment."""
    import ml_dtypes
    import numpy as np
    files = {name: _sha256(p) for name, p in package_files().items()}
    commit = ""
    if (source / ".git").exists():
        r = subprocess.run(["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True,
                           text=True)
        commit = r.stdout.strip()
    try:
        import scipy
        scipy_v = scipy.__version__
    except ImportError:
        scipy_v = "not installed"
    env = campaign.fingerprint()
    return {"ampref": env["ampref"], "commit": commit or "not a git checkout",
            "python": platform.python_version(), "numpy": np.__version__,
            "ml_dtypes": ml_dtypes.__version__, "scipy": scipy_v, "os": env["os"],
            "cpu": env["cpu"], "cores": os.cpu_count(), "files": files,
            "statement": INDEPENDENCE}


def spec_clauses(source: Path) -> list[dict[str, str]]:
    """Every clause ID of specs/*.md with the file that defines it and its full text
    (markdown; the bold markers of the ID's own heading removed). An ID that is only
    referred to, never defined in bold at a line start, gets the line that names it.

    Raises:
        ValueError: an ID defined twice (both places named): one clause's evidence would
            count for another.
    """
    defined: dict[str, dict[str, str]] = {}
    named: dict[str, dict[str, str]] = {}
    for md in sorted((source / "specs").glob("*.md")):
        text = md.read_text(encoding="utf-8")
        for m in _BOLD.finditer(text):
            body = m.group(1) + m.group(2).replace("**", "", 1)
            if m.group(1) in defined:
                raise ValueError(f"clause {m.group(1)} is defined twice: in "
                                 f"{defined[m.group(1)]['file']} and {md.name}")
            defined[m.group(1)] = {"id": m.group(1), "file": md.name,
                                   "text": " ".join(body.split())}
        for line in text.splitlines():
            for cid in CLAUSE.findall(line):
                named.setdefault(cid, {"id": cid, "file": md.name,
                                       "text": " ".join(line.split())})
    out = {**named, **defined}
    return [out[k] for k in sorted(out)]


def run_tests(source: Path, out: Path, args: list[str] | None = None,
              paths: list[Path] | None = None) -> dict[str, Any]:
    """Section 3: run the suite (or ``paths`` of it) with the evidence plugin and a JUnit
    XML report."""
    ev, junit = out / "tests.json", out / "junit.xml"
    env = dict(os.environ, AMPREF_EVIDENCE_OUT=str(ev))
    where = [str(p) for p in paths] if paths else [str(source / "tests")]
    # run from the output folder with the source as rootdir: `python -m pytest` puts its
    # working directory first on sys.path, and a source tree there would shadow the
    # installed package under test (a wheel has ampref.backends, the tree does not)
    config = ["-c", str(source / "pyproject.toml")] if (source / "pyproject.toml").exists() \
        else []
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "ampref.certify.plugin",
           "-p", "no:cacheprovider", f"--rootdir={source}", *config, f"--junitxml={junit}",
           *where, *(args or [])]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, cwd=out, env=env, capture_output=True, text=True)
    data = json.loads(ev.read_text()) if ev.exists() else {"exitstatus": r.returncode,
                                                          "items": {}}
    # the command without the output folder, so that two packs compare equal (CRT-QUA-005)
    data.update(seconds=time.perf_counter() - t0,
                command=" ".join(cmd[1:]).replace(str(out), "<out>"),
                tail=r.stdout[-1500:], junit=junit.name)
    return data


#: a requirement's status, from the outcomes of the cases that cite it (CRT-RPT-008)
STATUSES = ("verified", "verified-with-skips", "FAILED", "skipped", "uncovered")


def clause_status(clauses: list[dict[str, str]], items: dict[str, Any]) -> list[dict[str, Any]]:
    """clause -> tests -> outcome: FAILED if any citing test failed; verified if every
    citing test passed; verified-with-skips if some passed and the rest were skipped (or
    not run); skipped (with the reasons) if none passed; uncovered if none cites it."""
    by: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for nodeid, rec in items.items():
        for cid in rec["clauses"]:
            by.setdefault(cid, []).append((nodeid, rec))
    rows = []
    for c in clauses:
        tests = by.get(c["id"], [])
        outs = {r["outcome"] for _, r in tests}
        status = ("uncovered" if not tests else "FAILED" if "failed" in outs else
                  "verified" if outs == {"passed"} else
                  "verified-with-skips" if "passed" in outs else "skipped")
        rows.append({**c, "status": status, "skipped_cases": sum(
            r["outcome"] != "passed" for _, r in tests), "tests": [
            {"id": n, "outcome": r["outcome"], "reason": r["reason"][:300]} for n, r in tests]})
    return rows


def conformance(source: Path, items: dict[str, Any]) -> list[dict[str, Any]]:
    """Section 5: each recorded vector set in tests/data: size, SHA-256, the script that
    regenerates it, the tests that read it and their outcomes."""
    scripts = sorted((source / "scripts").glob("*.py"))
    tests = sorted((source / "tests").rglob("test_*.py"))
    rows = []
    for f in sorted((source / "tests" / "data").glob("*")):
        if f.suffix not in (".json", ".npz"):
            continue
        made = [s.name for s in scripts if f.name in s.read_text(encoding="utf-8")]
        users = [t.name for t in tests if f.name in t.read_text(encoding="utf-8")]
        outs = [r["outcome"] for n, r in items.items() if n.split("::")[0].endswith(tuple(users))]
        rows.append({"file": f.name, "bytes": f.stat().st_size, "sha256": _sha256(f),
                     "origin": made or ["(no script names it)"], "tests": users,
                     "passed": outs.count("passed"), "failed": outs.count("failed"),
                     "skipped": outs.count("skipped")})
    return rows


def determinism(out: Path, steps: int = 3) -> dict[str, Any]:
    """Section 7: one short run three times (1, 1 and 2 threads), final weights hashed."""
    runs = []
    for i, threads in enumerate((1, 1, 2)):
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        d = out / f"determinism_{i}"
        cmd = [sys.executable, "-m", "ampref", "train", "--precision", "amp-bf16", "--steps",
               str(steps), "--no-report", "--quiet", "--out", str(d)]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        final = d / "final.npz"
        runs.append({"threads": threads, "exit": r.returncode,
                     "sha256": _sha256(final) if final.exists() else "missing"})
    same = len({r["sha256"] for r in runs}) == 1 and runs[0]["sha256"] != "missing"
    return {"command": "ampref train --precision amp-bf16 --steps %d" % steps, "runs": runs,
            "identical": same}


def level_certificates(out: Path, strides: dict[str, int], scheduler: str | None,
                       backend: str | None = None) -> dict[str, int]:
    """Appendix A: the whole matrix, each format at its stride (``strides["default"]``
    for formats not named), in-process chunk by chunk, on Dask with ``scheduler``, or on
    the device ``backend`` (CRT-DEV-001); resumes if ``out`` holds earlier chunks this
    package computed on the same backend (CRT-BND-002). Returns the chunks computed now
    and reused."""
    named = [f for f in strides if f != "default"]
    rest = [f for f in campaign.matrix_formats() if f not in named] if "default" in strides \
        else []
    cells = [c for f in named for c in campaign.matrix([f], stride=strides[f])]
    cells += campaign.matrix(rest, stride=strides["default"]) if rest else []
    total = len(cells) * len(campaign.chunks(cells[0])) if cells else 0
    if backend is not None:
        from .device_campaign import run_device

        run = run_device(cells, out, backend)
    elif scheduler is not None:
        run = campaign.run_campaign(cells, out, scheduler=scheduler, progress=False)["run"]
    else:
        run = campaign.run_serial(cells, out)
    return {"computed": run, "reused": total - run}
