"""The ``ampref certify`` command: its arguments, each checked before anything runs, and
its three actions: make a pack, compare two (``--diff``), check one (``--check``)
(``specs/certify.md`` CRT-RPT-005, CRT-CLI-001, CRT-BND-003).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

__all__ = ["add_certify", "run"]


def _pack(path: str) -> dict[str, Any]:
    """A certify.json of this schema, or a named error (CRT-QUA-005)."""
    from .qualification import SCHEMA

    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"--diff: no such file {path!r}") from None
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"--diff: {path!r} is not a certify.json ({e})") from None
    if not isinstance(doc, dict) or "clauses" not in doc or "tests" not in doc:
        raise ValueError(f"--diff: {path!r} is not a certify.json (no clauses and tests)")
    if doc.get("schema") != SCHEMA:
        raise ValueError(f"--diff: {path!r} has schema {doc.get('schema')!r}; this ampref "
                         f"compares packs of schema {SCHEMA!r} (make both with one version)")
    clauses, tests = doc["clauses"], doc["tests"]
    if not isinstance(clauses, list) or not all(
            isinstance(c, dict) and isinstance(c.get("id"), str) and "status" in c
            for c in clauses) or not isinstance(tests, dict) or not isinstance(
            tests.get("items", {}), dict):
        raise ValueError(f"--diff: {path!r} is not a well-formed certify.json (every clause "
                         "needs an id and a status, tests an items table)")
    return doc


def _certify_args(args: argparse.Namespace) -> None:
    """Every certify argument checked before anything runs (CRT-CLI-001)."""
    from .campaign import check_scheduler

    if not args.out.strip():
        raise ValueError("--out is empty: give the folder for the evidence pack")
    if args.stride is not None and args.stride < 1:
        raise ValueError(f"--stride must be an int >= 1, got {args.stride}")
    if args.scheduler is not None:
        check_scheduler(args.scheduler)
    if args.backend is not None:
        if args.scheduler is not None:
            raise ValueError(f"--backend {args.backend} verifies the matrix on this "
                             f"process's device; --scheduler belongs to host campaigns")
        from .device_campaign import device_backend
        device_backend(args.backend)
    for folder in args.import_results or []:
        if not Path(folder).is_dir():
            raise ValueError(f"--import-results: no such folder {folder!r}")
    if args.source is not None:
        from .evidence import find_source
        find_source(args.source)


def run(args: argparse.Namespace) -> int:
    """``ampref certify``: exit 0 PASSED, 1 FAILED or differences, 3 INCOMPLETE; bad
    arguments raise ValueError before anything runs (the CLI prints one line, exit 2)."""
    if args.diff is not None:
        from .qualification import diff

        old, new = _pack(args.diff[0]), _pack(args.diff[1])
        changes = diff(old, new)
        print("\n".join(changes) if changes else "no differences (timestamps and durations "
              "aside)")
        return 1 if changes else 0
    if args.check is not None:
        from .check import check_pack

        found = check_pack(Path(args.check))
        digest = hashlib.sha256((Path(args.check) / "certify.json").read_bytes()).hexdigest()
        print("\n".join(found) if found else
              f"pack intact: every chunk matches the index, the certificates and the status "
              f"follow from the files; certify.json SHA-256 {digest}")
        return 1 if found else 0
    _certify_args(args)
    from .report import certify

    doc = certify(args.out, level=args.level, source=args.source, imports=args.import_results,
                  scheduler=args.scheduler, stride=args.stride, pdf=args.pdf,
                  backend=args.backend)
    print(f"ampref certify: {doc['status']}: {doc['headline']}")
    for p in doc["problems"]:
        print(f"  {p}")
    extra = "certify.json and certify.pdf" if args.pdf else "certify.json"
    print(f"report: {Path(args.out).resolve() / 'certify.html'} (and {extra})")
    return {"PASSED": 0, "INCOMPLETE": 3}.get(doc["status"], 1)


def add_certify(sub: Any) -> None:
    """The ``certify`` subcommand on an argparse subparsers object."""
    c = sub.add_parser("certify", help="certification evidence pack (HTML + JSON)",
                       description="Run the test suite, the verification matrix, the "
                       "conformance checks and a determinism check, and write one "
                       "self-contained certify.html and certify.json.")
    c.add_argument("--level", choices=["smoke", "quick", "full"], default="quick",
                   help="smoke: a complete pack from a documented subset of tests and "
                        "cells, under 2 minutes (INCOMPLETE by construction); "
                        "quick: every 65537th float32 input per cell (minutes); full: all "
                        "2^32 inputs of the float16 and bfloat16 cells, every 257th of the "
                        "rest (about 17 CPU-hours, on Dask: --scheduler, default local; "
                        "resumes in the same --out)")
    c.add_argument("--pdf", action="store_true",
                   help="also print the report to certify.pdf (headless Chromium)")
    c.add_argument("--diff", nargs=2, metavar=("OLD.json", "NEW.json"), default=None,
                   help="list what changed between two packs (exit 1 if anything did) and "
                        "run nothing else")
    c.add_argument("--check", default=None, metavar="PACK",
                   help="verify a pack folder: chunk files against its index, certificates "
                        "and status re-derived from them (exit 1 if anything disagrees)")
    c.add_argument("--stride", type=int, default=None,
                   help="check every N-th float32 input per cell instead of the level's")
    c.add_argument("--out", default="runs/certify", help="output folder (default runs/certify)")
    c.add_argument("--source", default=None,
                   help="folder with specs/ and tests/ (default: the checkout ampref runs from)")
    c.add_argument("--import-results", nargs="*", default=None, metavar="DIR",
                   help="campaign result folders computed elsewhere (ampref verify --matrix "
                        "--results DIR), shown with their own environments")
    c.add_argument("--scheduler", default=None,
                   help="run the matrix on Dask: local or tcp://HOST:PORT (default: in-process)")
    c.add_argument("--backend", default=None, metavar="DEVICE",
                   help="verify the matrix on a device backend (cupy): its CUDA rounding "
                        "kernel against the float64 oracle on the GPU, chunk by chunk in "
                        "this process; stochastic cells at a stride other than 1 on the host")
    c.set_defaults(func=run)
