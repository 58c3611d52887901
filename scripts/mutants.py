"""Mutation testing on demand (not in CI): plant one-line mutants in ampref's numeric
rooms and report which ones survive their own area's tests (issue 38).

    python scripts/mutants.py --per-area 12 --seed 1 --report mutants.md
    python scripts/mutants.py --tests-at <commit> --mutants-from mutants.json
        # the same mutants against an older suite

How: a detached ``git worktree`` of HEAD in a temporary folder (the checkout is never
touched), importable from PYTHONPATH (links stand in for setuptools' package-dir mapping
of ``ampref.backends`` and the shipped policies). Candidate sites are tokens of the
area's source files (comments and strings never): comparisons flipped at their boundary
(< and <=, > and >=, == and !=), + and -, * and /, integer literals +1, True and False,
``and`` and ``or``. A seeded sample of ``--per-area`` sites per area is applied one at a
time; the area's tests run with ``-x`` and a fresh numba cache per mutant of the kernel
rooms; a mutant is *caught* when they fail, *survives* when they pass, *timeout* past
``--timeout``. Each area's tests must pass unmutated first (else the area is reported
as not measurable). ``--tests-at`` checks the tests out from another commit, so one
sample of mutants scores two versions of the suite.

Survivors are not all bugs in the suite: some mutants are equivalent (they cannot change
any result); the report lists each survivor's diff so a reader can judge.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import tokenize
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: area -> (source files, test paths): a mutant in the sources is judged by the tests
AREAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "kernels": (("ampref/kernels/encode.py", "ampref/kernels/general_numba.py",
                 "ampref/kernels/encode_numba.py", "ampref/kernels/srhash.py"),
                ("tests/kernels", "tests/formats")),
    "scaler": (("ampref/scaling/machine.py", "ampref/scaling/profiles.py",
                "ampref/scaling/scaler.py"), ("tests/scaling",)),
    "accumulation": (("ampref/accumulation/tensorcore.py", "ampref/accumulation/gpus.py",
                      "ampref/accumulation/library.py", "ampref/accumulation/mfma.py"),
                     ("tests/accumulation",)),
    "recipes": (("ampref/recipes/mx.py", "ampref/recipes/nvfp4.py",
                 "ampref/recipes/elements.py", "ampref/recipes/pertensor.py",
                 "ampref/recipes/catalog.py"), ("tests/recipes",)),
    "engine": (("ampref/engine/functional/elementwise.py", "ampref/engine/functional/norms.py",
                "ampref/engine/functional/reductions.py", "ampref/engine/tensor.py",
                "ampref/engine/methods.py"), ("tests/engine",)),
    "bridge": (("ampref/torch/pointwise.py", "ampref/torch/normops.py",
                "ampref/torch/nnops.py"), ("tests/bridge",)),
    "bridge-ops": (("ampref/torch/explicit.py", "ampref/torch/groupedmm.py",
                    "ampref/torch/embedgrad.py", "ampref/torch/indexops.py",
                    "ampref/torch/fusedoptim.py", "ampref/torch/lossops.py",
                    "ampref/torch/convert.py", "ampref/torch/layout.py",
                    "ampref/torch/passthrough.py"), ("tests/bridge",)),
    "formats": (("ampref/formats/cast.py", "ampref/formats/rounding.py",
                 "ampref/formats/table.py", "ampref/formats/exactsum.py",
                 "ampref/formats/exactprod.py", "ampref/formats/identify.py"),
                ("tests/formats",)),
    "policy": (("ampref/policy/autocast.py", "ampref/policy/policies.py",
                "ampref/torch/autocast.py", "ampref/torch/outsidecasts.py",
                "ampref/torch/castargs.py", "ampref/torch/emulated.py"),
               ("tests/policy", "tests/bridge")),
    "distributed": (("ampref/distributed/collectives.py", "ampref/distributed/semantics.py",
                     "ampref/distributed/step.py"),
                    ("tests/dataparallel/test_collectives.py",
                     "tests/dataparallel/test_semantics.py", "tests/dataparallel/test_step.py",
                     "tests/dataparallel/test_dp_recorded.py")),
    "backends": (("backends/numpy_backend.py", "backends/device.py", "backends/fused.py"),
                 ("tests/backends",)),
    "certify": (("ampref/certify/check.py", "ampref/certify/evidence.py",
                 "ampref/certify/imported.py", "ampref/certify/binding.py",
                 "ampref/certify/qualification.py"), ("tests/certify",)),
    # rooms first measured on 2026-11-28 (seed 47)
    "accumulation-models": (("ampref/accumulation/models.py", "ampref/accumulation/registry.py",
                             "ampref/accumulation/certified.py",
                             "ampref/accumulation/blockmma.py",
                             "ampref/accumulation/tripledot.py",
                             "ampref/accumulation/identify.py"), ("tests/accumulation",)),
    "recipes-gemm": (("ampref/recipes/quantize.py", "ampref/recipes/gemm.py",
                      "ampref/recipes/tiles.py", "ampref/recipes/roles.py",
                      "ampref/recipes/compare.py", "ampref/recipes/identify.py",
                      "ampref/recipes/hadamard.py"), ("tests/recipes",)),
    "engine-nn": (("ampref/engine/amp.py", "ampref/engine/functional/core.py",
                   "ampref/engine/functional/losses.py", "ampref/engine/functional/attention.py",
                   "ampref/engine/functional/linalg.py", "ampref/engine/optim/optimizers.py",
                   "ampref/engine/optim/lr_scheduler.py", "ampref/engine/nn/modules.py"),
                  ("tests/engine",)),
    "scaling-io": (("ampref/scaling/unscale.py", "ampref/scaling/statedict.py",
                    "ampref/scaling/identify.py", "ampref/scaling/audit.py"), ("tests/scaling",)),
    "bridge-more": (("ampref/torch/convops.py", "ampref/torch/poolops.py",
                     "ampref/torch/statops.py", "ampref/torch/vecnorms.py",
                     "ampref/torch/marginops.py", "ampref/torch/nllops.py",
                     "ampref/torch/ctcops.py", "ampref/torch/interpops.py",
                     "ampref/torch/gridops.py", "ampref/torch/composites.py",
                     "ampref/torch/activations.py"), ("tests/bridge",)),
    "training": (("ampref/training/train.py", "ampref/training/run.py",
                  "ampref/training/checkpoint.py", "ampref/training/config.py",
                  "ampref/training/dataparallel.py", "ampref/training/stats.py"),
                 ("tests/training",)),
    "verify": (("ampref/certify/verify.py", "ampref/certify/limits.py",
                "ampref/certify/report.py", "ampref/certify/campaign.py"), ("tests/certify",)),
    # rooms first measured on 2026-11-28 (seed 79): every module no area named before
    "testing-kit": (("ampref/testing/assertions.py", "ampref/testing/blocks.py",
                     "ampref/testing/matches.py", "ampref/testing/strategies.py",
                     "ampref/testing/updates.py", "ampref/formats/ordinal.py"),
                    ("tests/test_testing.py", "tests/testing")),
    "engine-core": (("ampref/engine/creation.py", "ampref/engine/indices.py",
                     "ampref/engine/rng.py", "ampref/engine/serialization.py",
                     "ampref/engine/functional/shapes.py",
                     "ampref/engine/functional/quantized.py", "ampref/engine/nn/base.py",
                     "ampref/engine/nn/containers.py", "ampref/engine/nn/utils.py",
                     "ampref/engine/nn/stateless.py", "ampref/engine/optim/groups.py"),
                    ("tests/engine", "tests/bad_input/test_values.py")),
    "kernels-compiled": (("ampref/kernels/certify_numba.py",
                          "ampref/kernels/tensorcore_numba.py",
                          "ampref/kernels/oracle_numba.py", "ampref/kernels/optim_numba.py",
                          "ampref/kernels/bits.py", "ampref/kernels/switch.py"),
                         ("tests/kernels", "tests/formats", "tests/accumulation",
                          "tests/engine/test_nn_optim.py")),
    "bridge-rest": (("ampref/torch/bagops.py", "ampref/torch/rangeops.py",
                     "ampref/torch/pool3d.py", "ampref/torch/fusedops.py",
                     "ampref/torch/evalnorm.py", "ampref/torch/rnnops.py",
                     "ampref/torch/rreluops.py", "ampref/torch/specialfns.py",
                     "ampref/torch/trilinear.py", "ampref/torch/weightnorm.py",
                     "ampref/torch/ldexpop.py", "ampref/torch/countops.py",
                     "ampref/torch/outargs.py", "ampref/torch/measures.py",
                     "ampref/torch/cudacalls.py", "ampref/torch/jmpmode.py",
                     "ampref/torch/shadowing.py", "ampref/torch/modes.py",
                     "ampref/torch/base.py", "ampref/torch/report.py",
                     "ampref/torch/recipes.py", "ampref/torch/replay.py"), ("tests/bridge",)),
    "training-cli": (("ampref/training/command.py", "ampref/training/report.py",
                      "ampref/training/corpus.py", "ampref/training/faults.py",
                      "ampref/training/quantreport.py", "ampref/cli.py",
                      "ampref/common/checks.py", "ampref/common/atomicio.py"),
                     ("tests/training", "tests/bad_input", "tests/test_bad_input.py",
                      "tests/engine/test_quantized_linear.py")),
    "certify-cli": (("ampref/certify/command.py", "ampref/certify/pdf.py",
                     "ampref/certify/plugin.py", "ampref/certify/device_campaign.py",
                     "ampref/certify/verify_device.py", "ampref/accumulation/certify.py",
                     "ampref/formats/peers.py"), ("tests/certify", "tests/formats")),
    "backends-device": (("backends/cuda_kernels.py", "backends/kernelsrc.py",
                         "backends/hostbuild.py"), ("tests/backends",)),
}

SWAPS = {"<": "<=", "<=": "<", ">": ">=", ">=": ">", "==": "!=", "!=": "==", "+": "-",
         "-": "+", "*": "/", "/": "*", "True": "False", "False": "True", "and": "or",
         "or": "and"}


@dataclass(frozen=True)
class Mutant:
    area: str
    path: str
    line: int
    col: int
    old: str
    new: str

    def describe(self) -> str:
        return f"{self.path}:{self.line}: {self.old!r} -> {self.new!r}"


@dataclass
class Outcome:
    mutant: Mutant
    status: str  # caught | survived | timeout
    seconds: float
    source_line: str


def sites(area: str, path: str, root: Path) -> list[Mutant]:
    """Every mutable token of ``path`` (relative to ``root``, the worktree)."""
    text = (root / path).read_text()
    out: list[Mutant] = []
    prev = ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        (line, col), s = tok.start, tok.string
        bare_star = s == "*" and prev in ("(", ",")  # def f(a, *, b): not arithmetic
        if tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT):
            prev = s
        if bare_star:
            continue
        if tok.type == tokenize.OP and s in SWAPS or tok.type == tokenize.NAME and s in SWAPS:
            out.append(Mutant(area, path, line, col, s, SWAPS[s]))
        elif tok.type == tokenize.NUMBER and s.isdigit():
            out.append(Mutant(area, path, line, col, s, str(int(s) + 1)))
    return out


def sample(per_area: int, seed: int, areas: list[str], root: Path) -> list[Mutant]:
    rng = random.Random(seed)
    chosen: list[Mutant] = []
    for area in areas:
        cands = [m for p in AREAS[area][0] for m in sites(area, p, root)]
        chosen += rng.sample(cands, min(per_area, len(cands)))
    return chosen


def make_worktree(sources_at: str, tests_at: str | None) -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="ampref-mutants-"))
    tree = tmp / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                    sources_at], check=True, capture_output=True)
    if tests_at:  # the whole tests/ folder as it was then (files added since removed)
        shutil.rmtree(tree / "tests")
        subprocess.run(["git", "-C", str(tree), "checkout", tests_at, "--", "tests"],
                       check=True, capture_output=True)
        subprocess.run(["git", "-C", str(tree), "reset", "-q"], check=True)
    # setuptools' package-dir mapping, for imports from PYTHONPATH
    (tree / "ampref" / "backends").symlink_to(tree / "backends")
    (tree / "ampref" / "policy" / "shipped").symlink_to(tree / "specs" / "policies")
    return tree


def drop_worktree(tree: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   capture_output=True)
    shutil.rmtree(tree.parent, ignore_errors=True)


def run_tests(tree: Path, area: str, timeout: float, cache: str) -> tuple[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_CACHE_DIR": cache,
           "PYTHONDONTWRITEBYTECODE": "1"}
    # an older suite kept the bridge's tests in tests/torch
    paths = [p if (tree / p).exists() or p != "tests/bridge" else "tests/torch"
             for p in AREAS[area][1]]
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *paths]
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout", time.monotonic() - start
    return ("survived" if done.returncode == 0 else "caught"), time.monotonic() - start


def apply(tree: Path, m: Mutant) -> tuple[str, str]:
    """Write the mutant into the worktree; returns (original text, mutated line)."""
    f = tree / m.path
    text = f.read_text()
    lines = text.splitlines(keepends=True)
    line = lines[m.line - 1]
    assert line[m.col:m.col + len(m.old)] == m.old, (m, line)
    lines[m.line - 1] = line[:m.col] + m.new + line[m.col + len(m.old):]
    f.write_text("".join(lines))
    return text, lines[m.line - 1].rstrip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--per-area", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--areas", default=",".join(AREAS),
                    help=f"comma-separated subset of {', '.join(AREAS)}")
    ap.add_argument("--sources-at", default="HEAD", help="the commit whose sources mutate")
    ap.add_argument("--tests-at", default=None, help="take tests/ from this commit")
    ap.add_argument("--mutants-from", type=Path, default=None,
                    help="replay the mutants of an earlier report's JSON (same sample)")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per mutant")
    ap.add_argument("--report", type=Path, default=None, help="markdown report path")
    args = ap.parse_args(argv)
    areas = [a.strip() for a in args.areas.split(",") if a.strip()]
    unknown = [a for a in areas if a not in AREAS]
    if unknown or args.per_area < 1:
        print(f"mutants: unknown area(s) {unknown} (choose from {', '.join(AREAS)}) or "
              f"--per-area {args.per_area} < 1", file=sys.stderr)
        return 2
    # the commit the worktree holds, named now: HEAD may move while the mutants run
    args.sources_at = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short",
                                      args.sources_at], capture_output=True,
                                     text=True).stdout.strip() or args.sources_at
    tree = make_worktree(args.sources_at, args.tests_at)
    if args.mutants_from:
        rows = json.loads(args.mutants_from.read_text())
        mutants = [Mutant(**{k: r[k] for k in ("area", "path", "line", "col", "old", "new")})
                   for r in rows]
        areas = sorted({m.area for m in mutants}, key=list(AREAS).index)
    else:
        mutants = sample(args.per_area, args.seed, areas, tree)
    outcomes: list[Outcome] = []
    baseline: dict[str, str] = {}
    try:
        shared_cache = tempfile.mkdtemp(prefix="ampref-mutants-numba-")
        for area in areas:
            status, secs = run_tests(tree, area, args.timeout, shared_cache)
            baseline[area] = status
            print(f"baseline {area}: {'passes' if status == 'survived' else status} "
                  f"({secs:.0f} s)", flush=True)
        for m in mutants:
            if baseline[m.area] != "survived":
                continue
            original, line = apply(tree, m)
            fresh = m.area.startswith("kernels")  # numba's cache misses inlined changes
            cache = tempfile.mkdtemp(prefix="ampref-mutants-numba-") if fresh else shared_cache
            try:
                status, secs = run_tests(tree, m.area, args.timeout, cache)
            finally:
                (tree / m.path).write_text(original)
                if cache != shared_cache:
                    shutil.rmtree(cache, ignore_errors=True)
            outcomes.append(Outcome(m, status, secs, line.strip()))
            print(f"{status:8s} {secs:6.0f} s  {m.describe()}", flush=True)
    finally:
        drop_worktree(tree)
    text = report(outcomes, baseline, args)
    print(text)
    if args.report:
        args.report.write_text(text)
        args.report.with_suffix(".json").write_text(json.dumps(
            [{**asdict(o.mutant), "status": o.status, "seconds": round(o.seconds, 1)}
             for o in outcomes], indent=1))
    return 0


def report(outcomes: list[Outcome], baseline: dict[str, str], args: argparse.Namespace) -> str:
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.sources_at],
                          capture_output=True, text=True).stdout.strip()
    rows = ["| area | mutants | caught | survived | timeout | score |", "|---|---|---|---|---|---|"]
    for area, status in baseline.items():
        mine = [o for o in outcomes if o.mutant.area == area]
        if status != "survived":
            rows.append(f"| {area} | - | - | - | - | tests fail unmutated ({status}) |")
            continue
        n = {s: sum(o.status == s for o in mine) for s in ("caught", "survived", "timeout")}
        judged = n["caught"] + n["survived"]
        score = f"{n['caught']}/{judged}" if judged else "-"
        rows.append(f"| {area} | {len(mine)} | {n['caught']} | {n['survived']} | "
                    f"{n['timeout']} | {score} |")
    survivors = [f"- `{o.mutant.describe()}`: `{o.source_line}`" for o in outcomes
                 if o.status == "survived"]
    return "\n".join([
        f"# Mutation report: sources at {head}, tests at {args.tests_at or head}",
        "", (f"mutants replayed from {args.mutants_from}" if args.mutants_from else
             f"seed {args.seed}, {args.per_area} mutants per area") + ", machine "
        f"{os.uname().nodename}, {time.strftime('%Y-%m-%d %H:%M')}", "", *rows, "",
        "## Survivors", "", *(survivors or ["none"]), ""])


if __name__ == "__main__":
    sys.exit(main())
