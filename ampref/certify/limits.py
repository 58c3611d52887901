"""The pack's limitations, generated from the facts of the run, and the tool
qualification plan the applicant completes (``specs/certify.md`` CRT-LIM-001, CRT-TQP-001).

Nothing here is typed in by hand about a particular run: each limitation is counted from
the pack itself (skipped tests and their reasons, the certificate strides, the versions
that ran, imported runs, cases without a documented procedure).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["PLAN", "limitations"]

#: what a skip reason says about the missing capability
_GPU = re.compile(r"cuda|cupy|gpu|device", re.I)
_MODULE = re.compile(r"(?:No module named|could not import) '?([\w.]+)'?", re.I)

#: the tool qualification plan's sections, each with what the applicant fills in
PLAN = (
    ("Intended use", "Which outputs of ampref serve as expected values for which software "
     "items, and the tool's place in the verification process (DO-330 TQL, ISO 26262 TCL)."),
    ("Interfaces", "How results enter the user's process: the Python API or CLI calls used, "
     "the formats, models and profiles selected, where results are stored."),
    ("Operational environment", "The machines, Python and library versions the user "
     "qualifies (compare with this pack's configuration index and tested versions)."),
    ("Qualification activities", "Which parts of this pack the applicant relies on, which "
     "levels (smoke, quick, full) and imported runs are required, and which requirements "
     "marked here as not fully verified are out of the use case or need further work."),
    ("Configuration management", "How the tool's version is fixed (package digest of the "
     "configuration index), how packs are filed (certify.json SHA-256, --check), and how a "
     "new release is re-qualified (--diff against the filed pack)."),
    ("Independence", "Who prepared, reviewed and approved the pack, and their independence "
     "from the tool's developers as the applicable standard requires."),
)


def _skipped(items: dict[str, Any]) -> list[tuple[str, str]]:
    return [(n, r["reason"]) for n, r in items.items() if r["outcome"] in ("skipped", "not run")]


def limitations(doc: dict[str, Any]) -> list[dict[str, str]]:
    """One row per limitation of this pack (topic, fact, consequence)."""
    skipped = _skipped(doc["tests"]["items"])
    return [_gpu(skipped, doc.get("gpu_runs", [])), _peers(skipped),
            _certificates(doc["strides"]), _versions(doc["config"]["versions"]),
            _procedures(doc["cases"]), _scope(doc.get("incomplete", {}))]


def _row(topic: str, fact: str, consequence: str) -> dict[str, str]:
    return {"topic": topic, "fact": fact, "consequence": consequence}


def _gpu(skipped: list[tuple[str, str]], runs: list[dict[str, Any]]) -> dict[str, str]:
    gpu = [n for n, why in skipped if _GPU.search(why)]
    fact = f"{len(gpu)} test cases need a CUDA device and were skipped here" + (
        f"; {sum(r['passed'] for r in runs)} outcomes imported from {len(runs)} GPU run(s)"
        if runs else "; no GPU run was imported")
    return _row("GPU", fact, "requirements verified only on the GPU rest on the imported "
                "run's environment (section 2); import one with --import-results from "
                "scripts/gpu_check.sh" if gpu else "none")


def _peers(skipped: list[tuple[str, str]]) -> dict[str, str]:
    mods: dict[str, int] = {}
    for _, why in skipped:
        m = _MODULE.search(why)
        if m:
            mods[m.group(1)] = mods.get(m.group(1), 0) + 1
    if not mods:
        return _row("live comparisons", "every live comparison with an installed peer ran",
                    "none")
    return _row("live comparisons", "skipped for missing packages: " + ", ".join(
        f"{k} ({v} cases)" for k, v in sorted(mods.items())), "the recorded vectors of "
        "Appendix B still run; install the peer (ampref[conformance]) to repeat the live ones")


def _certificates(strides: dict[str, int]) -> dict[str, str]:
    sampled = {f: s for f, s in strides.items() if s > 1}
    full = ", ".join(f for f, s in strides.items() if s == 1) or "no cell"
    every = ", ".join(f"{'other formats' if f == 'default' else f} every {s}th input"
                      for f, s in sampled.items()) or "none"
    return _row("certificates", f"exhaustive (all 2^32 float32 inputs): {full}; sampled: "
                f"{every}", "a sampled cell certifies the inputs it checked, not the format; "
                "--level full checks fp16 and bf16 exhaustively" if sampled else "none")


def _versions(v: dict[str, str]) -> dict[str, str]:
    return _row("versions", f"this pack ran on Python {v['python']}, NumPy {v['numpy']}, "
                f"ml_dtypes {v['ml_dtypes']}, numba {v.get('numba')}, torch {v.get('torch')}",
                "other versions are covered by the project's CI (oldest floors of "
                "pyproject.toml and the newest releases), not by this pack: qualify the "
                "versions you deploy with a pack made on them")


def _procedures(cases: list[dict[str, Any]]) -> dict[str, str]:
    bare = sum(1 for c in cases if not c.get("documented"))
    return _row("procedures", f"{bare} of {len(cases)} cases have no docstring: their "
                "procedure is the test's name and its module's statement",
                "read the test's code for those cases" if bare else "none")


def _scope(inc: dict[str, list[str]]) -> dict[str, str]:
    n = sum(len(v) for v in inc.values())
    kinds = ", ".join(f"{len(ids)} {k}" for k, ids in inc.items() if ids) or "none"
    return _row("scope", f"{n} requirements not verified by passing cases alone ({kinds})",
                "listed under the banner and in section 5" if n else "none")
