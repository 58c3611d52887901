"""``ampref certify``: assemble the evidence into one self-contained HTML file and the
same content as JSON (specs/certify.md CRT-RPT-*).

The report says FAILED at the top, with the reasons, when a test failed, a clause's test
failed, a certificate mismatched or is incomplete, or the determinism runs differ; the
command then exits 1.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time
from importlib import resources
from pathlib import Path
from typing import Any

from . import campaign, evidence
from ampref.common.atomicio import atomic_write

__all__ = ["LEVELS", "certify", "render_html"]

#: stride of the certificate matrix per level: quick checks every 65537th float32
#: pattern of each of the 336 cells (minutes on 2 cores), full checks all 2^32
LEVELS = {"quick": 65537, "full": 1}


def _plot(counts: dict[str, int]) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ""
    fig, ax = plt.subplots(figsize=(5, 1.6))
    names = ["verified", "FAILED", "skipped", "uncovered"]
    colors = ["#2e7d32", "#c62828", "#b26a00", "#777777"]
    ax.barh(names, [counts[n] for n in names], color=colors)
    for i, n in enumerate(names):
        ax.text(counts[n], i, f" {counts[n]}", va="center", fontsize=8)
    ax.set_xlabel("spec clauses")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _problems(doc: dict[str, Any]) -> list[str]:
    out = []
    t = doc["tests"]
    if t["exitstatus"] not in (0,):
        failed = [n for n, r in t["items"].items() if r["outcome"] == "failed"]
        out.append(f"test run exit status {t['exitstatus']}: {len(failed)} failed "
                   f"({', '.join(failed[:5])})")
    bad = [c["id"] for c in doc["clauses"] if c["status"] == "FAILED"]
    if bad:
        out.append(f"clauses with a failing test: {', '.join(bad)}")
    for c in doc["certs"]:
        if not c["ok"]:
            out.append(f"certificate {c['key']}: {c['mismatches']} + {c['peer_mismatches']} "
                       f"mismatches, {c['chunks']}/{c['chunks_total']} chunks, first "
                       f"{c['first'][:2]}")
    if not doc["det"]["identical"]:
        out.append(f"determinism: the runs differ: {doc['det']['runs']}")
    if not doc["certs"]:
        out.append("no certificates were computed or imported")
    return out


def render_html(doc: dict[str, Any]) -> str:
    import jinja2
    src = resources.files("ampref.certify").joinpath("certify.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    return env.from_string(src).render(**doc)


def certify(out: str | Path, *, level: str = "quick", source: str | Path | None = None,
            imports: list[str] | None = None, scheduler: str | None = None,
            pytest_args: list[str] | None = None, stride: int | None = None) -> dict[str, Any]:
    """Run everything and write ``out/certify.html`` and ``out/certify.json``;
    ``stride`` overrides the level's stride of the certificate matrix.

    Raises:
        ValueError: unknown level (choices named), no specs/tests folder, jinja2 missing.
    """
    # why long: the evidence pack's sections in their report order, each one call
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    try:
        import jinja2  # noqa: F401
    except ImportError as e:
        raise ValueError("certify renders HTML with jinja2: pip install 'ampref[certify]'") from e
    t0 = time.perf_counter()
    root = evidence.find_source(source)
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    tests = evidence.run_tests(root, dest, pytest_args)
    clauses = evidence.clause_status(evidence.spec_clauses(root), tests["items"])
    counts = {k: sum(c["status"] == k for c in clauses)
              for k in ("verified", "FAILED", "skipped", "uncovered")}
    stride = LEVELS[level] if stride is None else stride
    own = evidence.quick_certificates(dest / "certificates", stride, scheduler)
    sources = [own, *(Path(p) for p in imports or [])]
    certs = [c for p in sources for c in campaign.certificates(p)]
    cert_blob = json.dumps(certs, sort_keys=True).encode()
    items = tests["items"]
    outcomes = [r["outcome"] for r in items.values()]
    doc: dict[str, Any] = {
        "level": level, "stride": stride, "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "ident": evidence.identification(root), "clauses": clauses, "counts": counts,
        "tests": {**tests, "summary": f"{outcomes.count('passed')} passed, "
                  f"{outcomes.count('failed')} failed, {outcomes.count('skipped')} skipped "
                  f"in {tests['seconds']:.0f} s"},
        "certs": certs, "cert_sources": [str(p) for p in sources],
        "cert_sha": hashlib.sha256(cert_blob).hexdigest(),
        "cert_envs": sorted({e for c in certs for e in c["environments"]}),
        "vectors": evidence.conformance(root, items), "deviations": evidence.deviations(root),
        "det": evidence.determinism(dest)}
    doc["problems"] = _problems(doc)
    doc["gaps"] = [f"{c['id']} ({c['file']}): {c['status']}"
                   + (f": {c['tests'][0]['reason'][:160]}" if c["tests"] else "")
                   for c in clauses if c["status"] in ("skipped", "uncovered")]
    doc["status"] = "FAILED" if doc["problems"] else "PASSED"
    doc["headline"] = (f"{counts['verified']}/{len(clauses)} clauses verified, "
                       f"{len(certs)} certificates, {len(doc['problems'])} problems")
    doc["seconds"] = time.perf_counter() - t0
    doc["plot"] = _plot(counts)
    atomic_write(str(dest / "certify.json"),
                 json.dumps({k: v for k, v in doc.items() if k != "plot"}, indent=1,
                            default=str) + "\n")
    atomic_write(str(dest / "certify.html"), render_html(doc))
    return doc
