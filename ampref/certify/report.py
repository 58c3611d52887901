"""``ampref certify``: assemble the evidence into one self-contained HTML file, the same
content as JSON, and on request a PDF (specs/certify.md CRT-RPT-*, CRT-QUA-*).

The pack follows the qualification data items a reviewer files (DO-330 / ISO 26262-8
clause 11): accomplishment summary, configuration index, tool operational requirements
(the spec clauses), verification cases and procedures (the tests), verification results,
problem reports, deviations with impact, and appendices (certificates, vector sets, file
hashes). Its status (CRT-RPT-008): FAILED, with the reasons, when a test failed, a
clause's test failed, a certificate mismatched or is incomplete, evidence is not bound to
this configuration, or the determinism runs differ (exit 1); else INCOMPLETE when a
requirement is not verified by passing cases alone (uncovered, only skipped, or verified
with some cases skipped: each listed; exit 3); else PASSED (exit 0).
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

from ampref.common.atomicio import atomic_write

from . import binding, campaign, evidence, imported, limits, qualification

__all__ = ["LEVELS", "SMOKE_TESTS", "SUMMARY", "certify", "pack_title", "render_html"]

#: stride of the certificate matrix per level and format ("default": every other format).
#: quick: every 65537th float32 pattern of each of the 336 cells (minutes on 2 cores);
#: full: all 2^32 patterns of the 56 float16 and bfloat16 cells (the formats AMP trains
#: in), every 257th of the rest (16.7 million per cell): about 17 CPU-hours, on Dask
LEVELS: dict[str, dict[str, int]] = {
    "smoke": {"float16": 1048577, "bfloat16": 1048577, "float8_e4m3fn": 1048577},
    "quick": {"default": 65537},
    "full": {"float16": 1, "bfloat16": 1, "default": 257},
}

#: smoke: a complete pack (every section) from a documented subset, in under 2 minutes on
#: 2 cores: these test files (one or more per spec), the certificate cells of the three
#: formats AMP trains in at every 1048577th input; every other requirement shows as
#: uncovered, so a smoke pack is INCOMPLETE by construction (CRT-LVL-001)
SMOKE_TESTS = ("tests/formats/test_formats.py", "tests/formats/test_peers.py",
               "tests/scaling/test_scaling.py", "tests/policy/test_autocast.py",
               "tests/accumulation/test_library.py", "tests/accumulation/test_gpus.py",
               "tests/recipes/test_recipes.py", "tests/engine/test_engine.py",
               "tests/dataparallel/test_semantics.py", "tests/bridge/test_bridge.py",
               "tests/kernels/test_numeric_kernels.py", "tests/test_traceability.py")

#: the fixed parts of the accomplishment summary (the figures come from the run)
SUMMARY = {
    "scope": "ampref as a verification tool: its outputs (rounded values, accumulation "
             "results, loss-scaler decisions, autocast plans, recipe quantizations) serve as "
             "the expected values against which a user's low-precision implementation is "
             "checked. The pack covers every behaviour its specs state as a clause.",
    "qualification": "Meant to support DO-330 tool qualification at TQL-5 (a verification "
                     "tool that cannot insert an error into the airborne software, DO-178C "
                     "criterion 3) and ISO 26262-8 clause 11, method 'validation of the "
                     "software tool' (11.4.9), for the tool confidence level the user "
                     "determines from the tool's use case. The user's tool qualification "
                     "plan decides; this pack is data for it, not a certificate.",
    "compliance": "Every tool operational requirement below is a spec clause with an ID; "
                  "each is verified by the cases that cite it, run in this session on the "
                  "configuration identified below. The status banner states whether every "
                  "requirement is verified, and the problem reports list every exception.",
}


def _plot(counts: dict[str, int]) -> str:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return ""
    fig, ax = plt.subplots(figsize=(5, 1.5))
    names = list(evidence.STATUSES)
    colors = ["#2e7d32", "#7cb342", "#c62828", "#b26a00", "#777777"]
    ax.barh(names, [counts[n] for n in names], color=colors)
    for i, n in enumerate(names):
        ax.text(counts[n], i, f" {counts[n]}", va="center", fontsize=8)
    ax.set_xlabel("spec clauses")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, metadata={"Software": None})
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
    this = doc["config"]["tool"]["package_sha256"]
    for c in doc["certs"]:
        foreign = sorted({json.loads(e).get("package", "none")
                          for e in c["environments"]} - {this})
        if foreign:  # imported evidence of another package is not this tool's evidence
            out.append(f"certificate {c['key']}: chunks computed by another package "
                       f"({', '.join(f[:12] for f in foreign)}; this one is {this[:12]})")
    out += [f"deviation of {d['clause'] or d['file']} ({d['source']}) states no impact"
            for d in doc["deviations"] if not d["impact"]]
    return out


def _headline(doc: dict[str, Any], n: int) -> str:
    """``239/277 requirements verified by passing cases (12 verified with skips, 3 only
    skipped, 23 uncovered), 336 certificates, 0 problems``."""
    c = doc["counts"]
    rest = [f"{c['verified-with-skips']} verified with skips" if c["verified-with-skips"]
            else "", f"{c['skipped']} only skipped" if c["skipped"] else "",
            f"{c['uncovered']} uncovered" if c["uncovered"] else "",
            f"{c['FAILED']} failed" if c["FAILED"] else ""]
    rest = [r for r in rest if r]
    return (f"{c['verified']}/{n} requirements verified by passing cases"
            + (f" ({', '.join(rest)})" if rest else "")
            + f", {len(doc['certs'])} certificates, {len(doc['problems'])} problems")


def _reports(doc: dict[str, Any]) -> list[dict[str, str]]:
    """Problem reports: every failed or skipped test case and every uncovered clause,
    each with its reason (skip reasons without pytest's 'Skipped: ' prefix)."""
    rows = []
    for nodeid, rec in sorted(doc["tests"]["items"].items()):
        if rec["outcome"] in ("failed", "skipped", "not run"):
            reason = rec["reason"].strip().removeprefix("Skipped: ")
            rows.append({"item": qualification.short_name(nodeid), "id": nodeid,
                         "kind": rec["outcome"], "reason": reason[:300]})
    rows += [{"item": c["id"], "id": c["id"], "kind": "uncovered",
              "reason": "no test cites this clause"}
             for c in doc["clauses"] if c["status"] == "uncovered"]
    return rows


def _markdown() -> Any:
    try:
        from markdown_it import MarkdownIt
    except ImportError as e:
        raise ValueError("certify renders spec text with markdown-it-py: pip install "
                         "'ampref[certify]'") from e
    return MarkdownIt("commonmark", {"html": False})  # raw HTML in a spec stays text


def render_html(doc: dict[str, Any]) -> str:
    """The pack as HTML: clause and deviation texts rendered from their markdown."""
    import jinja2
    from markupsafe import Markup

    md = _markdown()
    src = resources.files("ampref.certify").joinpath("certify.html.j2").read_text(encoding="utf-8")
    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["md"] = lambda text: Markup(md.renderInline(text))
    return env.from_string(src).render(**doc)


def _clause_cases(clauses: list[dict[str, Any]], cases: list[dict[str, Any]]) -> None:
    """Each clause's verification as case IDs with outcome counts (not one line per
    parametrization: a clause with 300 parametrized tests stays one row)."""
    by: dict[str, list[dict[str, Any]]] = {}
    for c in cases:
        for cid in c["clauses"]:
            by.setdefault(cid, []).append(c)
    for cl in clauses:
        cl["cases"] = [{"case": c["case"], "name": c["name"], "id": c["id"],
                        "outcomes": c["outcomes"]} for c in by.get(cl["id"], [])]


def certify(out: str | Path, *, level: str = "quick", source: str | Path | None = None,
            imports: list[str] | None = None, scheduler: str | None = None,
            pytest_args: list[str] | None = None, stride: int | None = None,
            pdf: bool = False, backend: str | None = None) -> dict[str, Any]:
    """Run everything and write ``out/certify.html`` and ``out/certify.json`` (and
    ``out/certify.pdf`` with ``pdf``); ``stride`` overrides the level's stride of the
    certificate matrix; ``backend`` (a device backend, ``cupy``) verifies the matrix on
    the device (CRT-DEV-001) instead of the host.

    Raises:
        ValueError: unknown level (choices named), no specs/tests folder, jinja2 or
            markdown-it-py missing, no Chromium for ``pdf``, a backend that is not an
            available device backend, or a backend with a scheduler.
    """
    # why long: the evidence pack's items in their report order, each one call
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; choose one of {', '.join(LEVELS)}")
    try:
        import jinja2  # noqa: F401
    except ImportError as e:
        raise ValueError("certify renders HTML with jinja2: pip install 'ampref[certify]'") from e
    _markdown()
    if backend is not None:
        if scheduler is not None:
            raise ValueError(f"--backend {backend} verifies the matrix on this process's "
                             f"device; --scheduler {scheduler} belongs to host campaigns")
        from .device_campaign import device_backend
        device_backend(backend)  # refuse before the long run, not after it
    if pdf:
        from .pdf import browser
        browser()  # refuse before the long run, not after it
    t0 = time.perf_counter()
    root = evidence.find_source(source)
    dest = Path(out)
    dest.mkdir(parents=True, exist_ok=True)
    paths = [root / t for t in SMOKE_TESTS] if level == "smoke" else None
    tests = evidence.run_tests(root, dest, pytest_args, paths)
    gpu_runs = imported.import_runs([Path(p).resolve() for p in imports or []], tests["items"])
    clauses = evidence.clause_status(evidence.spec_clauses(root), tests["items"])
    cases = qualification.cases(root, tests["items"])
    _clause_cases(clauses, cases)
    counts = {k: sum(c["status"] == k for c in clauses) for k in evidence.STATUSES}
    strides = LEVELS[level] if stride is None else {"default": stride}
    if level == "full" and scheduler is None and backend is None:
        scheduler = "local"  # the full matrix runs on the campaign machinery (resumable)
    own = dest / "certificates"
    made = evidence.level_certificates(own, strides, scheduler, backend)
    folders = [own, *(Path(p).resolve() for p in imports or [])]
    certs = [c for p in folders for c in campaign.certificates(p)]
    items = tests["items"]
    outcomes = [r["outcome"] for r in items.values()]
    doc: dict[str, Any] = {
        "schema": qualification.SCHEMA, "level": level, "strides": strides,
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "summary_text": SUMMARY,
        "config": qualification.configuration(root, evidence.PACKAGE),
        "ident": evidence.identification(root), "clauses": clauses, "cases": cases,
        "counts": counts,
        "tests": {**tests, "summary": f"{outcomes.count('passed')} passed, "
                  f"{outcomes.count('failed')} failed, {outcomes.count('skipped')} skipped"},
        "certs": certs, "imports": [str(p) for p in folders[1:]], "gpu_runs": gpu_runs,
        "cert_sources": [f"{own.name}/: {made['computed']} chunks computed by this run, "
                         f"{made['reused']} reused from an earlier run of this package",
                         *(f"imported from {p}" for p in folders[1:])],
        "cert_sha": hashlib.sha256(json.dumps(qualification.stable(certs),
                                              sort_keys=True).encode()).hexdigest(),
        "cert_envs": sorted({e for c in certs for e in c["environments"]}),
        "vectors": evidence.conformance(root, items),
        "deviations": qualification.deviations(root), "det": evidence.determinism(dest)}
    doc["config"]["chunks"] = binding.chunk_digests(folders)
    doc["problems"] = _problems(doc)
    doc["reports"] = _reports(doc)
    doc["incomplete"] = {k: [c["id"] for c in clauses if c["status"] == k]
                         for k in ("verified-with-skips", "skipped", "uncovered")}
    doc["status"] = ("FAILED" if doc["problems"] else
                     "INCOMPLETE" if counts["verified"] < len(clauses) else "PASSED")
    doc["headline"] = _headline(doc, len(clauses))
    doc["limitations"] = limits.limitations(doc)
    doc["plan"] = [{"section": a, "fill": b} for a, b in limits.PLAN]
    doc["title"] = pack_title(doc, level)
    doc["seconds"] = time.perf_counter() - t0
    doc["plot"] = _plot(counts)
    atomic_write(str(dest / "certify.json"),
                 json.dumps({k: v for k, v in doc.items() if k != "plot"}, indent=1,
                            default=str) + "\n")
    doc["toc_pages"] = {}
    atomic_write(str(dest / "certify.html"), render_html(doc))
    if pdf:
        _print(doc, dest)
    return doc


def pack_title(doc: dict[str, Any], level: str) -> str:
    """The pack's one-line title: version, level, the commit (a hex id cut to its first 12
    digits, as git's short form; any other text, such as "not a git checkout", whole),
    working-tree state and status."""
    commit = doc["config"]["commit"]
    commit = commit[:12] if all(ch in "0123456789abcdef" for ch in commit) else commit
    return (f"ampref {doc['ident']['ampref']} evidence, {level} level, commit "
            f"{commit} ({doc['config']['working_tree']}): {doc['status']}")


def _print(doc: dict[str, Any], dest: Path) -> None:
    """certify.pdf with page numbers in its contents: a first print's outline gives each
    section's page, the HTML is rendered with them and printed again (CRT-QUA-004)."""
    from .pdf import print_pdf, section_pages

    print_pdf(dest / "certify.html", dest / "certify.pdf")
    pages = section_pages(dest / "certify.pdf")
    doc["toc_pages"] = {title.split(". ", 1)[-1].split(" (")[0]: page
                        for title, page in pages.items()}
    atomic_write(str(dest / "certify.html"), render_html(doc))
    print_pdf(dest / "certify.html", dest / "certify.pdf")
