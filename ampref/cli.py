"""Command line: ``ampref verify`` and ``ampref train``.

Every error, argparse's included, is one line on stderr and exit status 2 (TRN-ERR-001).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any, NoReturn

from ampref.certify.command import add_certify
from ampref.formats.table import FORMATS, get_format
from ampref.formats.rounding import RoundingMode


class _OneLineParser(argparse.ArgumentParser):
    """argparse with one-line errors: ``ampref train: error: ...`` and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _verify(args: argparse.Namespace) -> int:
    from ampref.certify.verify import summary, verify

    if args.matrix is not None and args.backend != "numpy":
        raise ValueError(f"--matrix campaigns run on host workers; --backend {args.backend} "
                         "verifies one cell (drop --matrix, or use --backend numpy)")
    if args.matrix is not None:
        return _campaign(args)
    if args.scheduler is not None or args.results is not None:
        raise ValueError("--scheduler and --results belong to a campaign: add --matrix "
                         "all|FORMAT...")
    if args.backend != "numpy":
        return _verify_device(args)
    res = verify(args.format, args.rounding or "nearest_even", stride=args.stride,
                 saturate=args.saturate,
                 subnormals=not args.no_subnormals, seed=args.seed, workers=args.workers,
                 progress=not args.quiet)
    print(summary(res))
    return 0 if res.ok else 1


def _verify_device(args: argparse.Namespace) -> int:
    """``ampref verify --backend cupy``: one cell on the device (FMT-VER-004)."""
    from ampref.certify.verify import summary
    from ampref.certify.verify_device import verify_device

    res = verify_device(args.format, args.rounding or "nearest_even", backend=args.backend,
                        stride=args.stride, saturate=args.saturate,
                        subnormals=not args.no_subnormals, seed=args.seed)
    print(summary(res))
    return 0 if res.ok else 1


def _campaign(args: argparse.Namespace) -> int:
    from ampref.certify.campaign import certificates, check_scheduler, matrix, run_campaign

    if args.results is None:
        raise ValueError("a campaign needs --results DIR (one file per finished chunk, so it "
                         "can resume)")
    formats = _list(args.matrix, "--matrix")
    cells = matrix("all" if formats == ["all"] else formats, stride=args.stride,
                   seed=args.seed, roundings=[args.rounding] if args.rounding else None,
                   saturate=True if args.saturate else None,
                   subnormals=False if args.no_subnormals else None)
    check_scheduler("local" if args.scheduler is None else args.scheduler, args.workers)
    counts = run_campaign(cells, args.results, scheduler=args.scheduler or "local",
                          workers=args.workers, progress=not args.quiet)
    keys = {c.key for c in cells}
    certs = [c for c in certificates(args.results) if c["key"] in keys]
    bad = [c for c in certs if not c["ok"]]
    print(f"ampref verify campaign: {len(certs)} certificates, {counts['run']} chunks run now, "
          f"{counts['already_done']} already done; mismatching or incomplete: {len(bad)}")
    for c in bad[:10]:
        print(f"  {c['key']}: {c['mismatches']} + {c['peer_mismatches']} mismatches, "
              f"{c['chunks']}/{c['chunks_total']} chunks, first {c['first'][:2]}")
    return 1 if bad else 0


def _list(values: list[str] | None, flag: str) -> list[str]:
    """A list flag's items: ``a b``, ``a,b`` and ``a, b`` mean the same; empty items
    (``,,``) are refused."""
    items = [v.strip() for raw in values or [] for v in raw.split(",")]
    if not items or any(not v for v in items):
        raise ValueError(f"{flag} needs names separated by commas or spaces, got "
                         f"{' '.join(values or []) or 'nothing'!r}")
    return items


# train flags that map one to one onto TrainConfig fields
_TRAIN_FIELDS = ("steps", "seed", "batch", "context", "width", "heads", "blocks", "lr", "profile",
                 "static_scale", "inject_nonfinite", "checkpoint_every", "data", "backend",
                 "recipe_profile", "ranks", "reduce_dtype")


def _plants(values: list[str] | None) -> tuple[tuple[int, int], ...]:
    """``--plant-overflow 30@2 41@0`` (or ``30@2,41@0``) as ((30, 2), (41, 0))."""
    out = []
    for item in _list(values, "--plant-overflow"):
        step, at, rank = item.partition("@")
        if not at or not step.strip().isdigit() or not rank.strip().isdigit():
            raise ValueError(f"--plant-overflow takes STEP@RANK (e.g. 30@2), got {item!r}")
        out.append((int(step), int(rank)))
    return tuple(out)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig fields the user set on the command line (defaults are None)."""
    return {k: getattr(args, k) for k in _TRAIN_FIELDS if getattr(args, k) is not None}


def _train(args: argparse.Namespace) -> int:
    # why long: one check per flag combination the user can get wrong, each with its one-line
    # message, in the order argparse hands them over
    from ampref.training.checkpoint import checkpoint_config
    from ampref.training.train import compare, compare_table, train
    from ampref.training.config import DEFAULT_COMPARE, MODES, TrainConfig, TrainError

    given = _given(args)
    if args.plant_overflow is not None:
        given["plant"] = _plants(args.plant_overflow)
    dps = None if args.dp is None else _list(args.dp, "--dp")
    if dps is not None and len(dps) == 1:
        given["dp"] = dps[0]
    report = not args.no_report
    if args.resume:
        if args.compare is not None:
            raise TrainError("--resume continues one run: drop --compare (the mode is stored "
                             "in the checkpoint)")
        stored, _ = checkpoint_config(args.out)
        if args.precision is not None:
            given["precision"] = args.precision
        clash = {k: v for k, v in given.items() if k != "steps" and getattr(stored, k) != v}
        if clash:
            raise TrainError("--resume continues the stored run; these flags differ from its "
                             "checkpoint: " + ", ".join(f"--{k.replace('_', '-')} {v!r} (stored "
                             f"{getattr(stored, k)!r})" for k, v in clash.items())
                             + "; drop them, or start a new run with another --out")
        cfg = replace(stored, **{k: v for k, v in given.items() if k == "steps"})
        summary = train(cfg, args.out, resume=True, progress=not args.quiet, report=report)
        print(compare_table([summary]))
        print(f"outputs in {Path(args.out).resolve()}")
        return 0
    one = args.precision is not None and args.compare is None
    modes = [args.precision] if one else (
        list(DEFAULT_COMPARE) if not args.compare else _list(args.compare, "--compare"))
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise TrainError(f"unknown precision mode(s) {', '.join(unknown)}; choose from "
                         f"{', '.join(MODES)}")
    scaled = [m for m in modes if MODES[m].scaler is not None]
    if "profile" in given and not any(MODES[m].scaler == "dynamic" for m in modes):
        raise TrainError(f"--profile {given['profile']} sets the dynamic loss scaler, which "
                         f"none of {', '.join(modes)} uses (amp-fp16 does)")
    if "recipe_profile" in given and not any(MODES[m].recipe for m in modes):
        raise TrainError(f"--recipe-profile {given['recipe_profile']} sets the arithmetic of the "
                         f"FP8/FP4 modes, none of which is among {', '.join(modes)}")
    if "static_scale" in given and "fp16-static" not in modes:
        raise TrainError("--static-scale sets the scale of fp16-static, which is not among "
                         f"{', '.join(modes)}")
    if given.get("inject_nonfinite") and not scaled:
        raise TrainError(f"--inject-nonfinite needs a mode with a loss scaler that skips "
                         f"non-finite steps (amp-fp16, fp16-static), not {', '.join(modes)}")
    cfg = TrainConfig(precision=modes[0], **given)
    if dps is not None and len(dps) > 1:
        return _train_dps(cfg, dps, modes, args, report)
    if one:
        summary = train(cfg, args.out, progress=not args.quiet, report=report)
        print(compare_table([summary]))
        print(f"outputs in {Path(args.out).resolve()} ({'report.md, ' if report else ''}"
              "metrics.json, final.npz)")
        return 0
    # modes run in parallel processes on the host backend (the results do not depend on
    # it); a device backend keeps one process on its one GPU
    jobs = args.jobs if args.jobs is not None else (
        min(len(modes), os.cpu_count() or 1) if cfg.backend == "numpy" else 1)
    rows = compare(cfg, modes, args.out, progress=not args.quiet, report=report, jobs=jobs)
    print(compare_table(rows))
    print(f"outputs in {Path(args.out).resolve()} (compare.json, compare.md, compare.png, "
          "one folder per mode)")
    return 0


def _train_dps(cfg: Any, dps: list[str], modes: list[str], args: argparse.Namespace,
               report: bool) -> int:
    """``--dp a,b,...``: one mode under several frameworks' data-parallel semantics."""
    from ampref.training.train import compare_dp, dp_table

    if len(modes) > 1:
        raise ValueError("--dp with several names compares frameworks on one mode: pass "
                         "--precision (not --compare)")
    rows = compare_dp(cfg, dps, args.out, progress=not args.quiet, report=report)
    print(dp_table(rows))
    print(f"outputs in {Path(args.out).resolve()} (dp_compare.md, dp_compare.json, one folder "
          "per semantics)")
    return 0


def _add_verify(sub: Any) -> None:
    v = sub.add_parser("verify", help="exhaustive float32 -> format rounding certificate",
                       description="Round every float32 bit pattern (or every --stride-th) and "
                       "compare bit for bit with independent implementations. All 2^32 patterns "
                       "take about 4 minutes for float16 and 1.5 for bfloat16 on 2 cores; "
                       "--stride 4099 takes seconds.")
    v.add_argument("--format", default="float16",
                   help=f"target format (default float16); one of {', '.join(FORMATS)} or an alias")
    v.add_argument("--rounding", default=None, choices=[m.value for m in RoundingMode],
                   help="rounding mode (default nearest_even; with --matrix: only this mode "
                        "instead of all)")
    v.add_argument("--stride", type=int, default=1,
                   help="check every N-th pattern (default 1: all 2^32)")
    v.add_argument("--saturate", action="store_true",
                   help="clamp overflow to ±max (with --matrix: only saturating cells)")
    v.add_argument("--no-subnormals", action="store_true",
                   help="flush subnormal results to zero (with --matrix: only flushing cells)")
    v.add_argument("--seed", type=int, default=0, help="seed for stochastic rounding (default 0)")
    v.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    v.add_argument("--backend", default="numpy", choices=("numpy", "cupy"),
                   help="where one cell runs: numpy (host processes, peers too; default) or "
                        "cupy (kernel and float64 oracle on the GPU, FMT-VER-004)")
    v.add_argument("--matrix", nargs="+", metavar="FORMAT", default=None,
                   help="run a campaign: 'all' or formats, comma-separated (a,b; spaces work "
                        "too), x every rounding mode x saturate x subnormals, in chunks on "
                        "Dask (needs --results)")
    v.add_argument("--scheduler", default=None,
                   help="campaign scheduler: 'local' (a LocalCluster of --workers processes, "
                        "default) or tcp://HOST:PORT of a running 'dask scheduler'")
    v.add_argument("--results", default=None, metavar="DIR",
                   help="campaign results: one JSON file per finished chunk; rerunning "
                        "resumes")
    v.set_defaults(func=_verify)


def _add_train(sub: Any) -> None:
    # why long: the argparse table of the train command, one add_argument per flag
    from ampref.scaling.profiles import PROFILES
    from ampref.training.config import DEFAULT_COMPARE, MODES, RECIPE_PROFILES, TrainConfig

    d = TrainConfig()
    t = sub.add_parser(
        "train", help="small from-scratch AMP training with a numerics report",
        description="Train a character-level transformer on embedded text. Without --precision "
        f"it compares {', '.join(DEFAULT_COMPARE)} with the same seed and data order. "
        "--resume continues the run in --out from its newest checkpoint: the configuration "
        "is stored there, so only --out (and optionally a larger --steps) is needed.")
    t.add_argument("--precision", choices=list(MODES), default=None,
                   help="train one mode (default: compare several)")
    t.add_argument("--compare", nargs="*", default=None, metavar="MODES",
                   help=f"modes to compare, comma-separated (a,b; spaces work too; default "
                        f"{','.join(DEFAULT_COMPARE)})")
    t.add_argument("--out", default="runs/train", help="output folder (default runs/train)")
    t.add_argument("--resume", action="store_true",
                   help="continue the run in --out from its newest checkpoint")
    from ampref import backends  # type: ignore[attr-defined]  # mapped from backends/

    t.add_argument("--backend", choices=backends.names(),
                   help=f"array backend (default {d.backend})")
    helps = {"steps": "training steps", "seed": "seed of weights, data order and dropout",
             "batch": "sequences per step", "context": "characters per sequence",
             "width": "model width", "heads": "attention heads", "blocks": "transformer blocks",
             "lr": "AdamW learning rate", "checkpoint_every": "steps between checkpoints"}
    types = {f.name: f.type for f in fields(TrainConfig)}
    for name, text in helps.items():
        kind = float if types[name] in ("float", float) else int
        t.add_argument(f"--{name.replace('_', '-')}", type=kind,
                       help=f"{text} (default {getattr(d, name)})")
    t.add_argument("--profile", choices=list(PROFILES),
                   help=f"loss-scaler profile of amp-fp16 (default {d.profile})")
    t.add_argument("--recipe-profile", choices=list(RECIPE_PROFILES),
                   help=f"implementation whose arithmetic the FP8/FP4 modes use (default "
                        f"{d.recipe_profile})")
    t.add_argument("--static-scale", type=float,
                   help=f"loss scale of fp16-static (default {d.static_scale:g})")
    t.add_argument("--inject-nonfinite", type=float, metavar="RATE",
                   help="plant inf/NaN in the gradients of a seeded fraction of steps (default 0)")
    from ampref.distributed import DP_PROFILES, REDUCE_DTYPES

    t.add_argument("--ranks", type=int,
                   help="data-parallel ranks emulated in this process; the batch is split "
                        f"among them (default {d.ranks})")
    t.add_argument("--dp", nargs="*", default=None, metavar="NAMES",
                   help=f"data-parallel semantics ({', '.join(DP_PROFILES)}; default: the "
                        "--profile's); several names (a,b) run one mode under each")
    t.add_argument("--reduce-dtype", choices=list(REDUCE_DTYPES),
                   help=f"dtype gradients are reduced in across ranks (default {d.reduce_dtype})")
    t.add_argument("--plant-overflow", nargs="*", default=None, metavar="STEP@RANK",
                   help="plant +inf into that rank's local gradient at that step (e.g. 30@2)")
    t.add_argument("--data", default=None,
                   help="a UTF-8 text file instead of the embedded text (first 8 MiB used)")
    t.add_argument("--no-report", action="store_true", help="skip the plots and report.md")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.add_argument("--jobs", type=int, default=None,
                   help="modes trained at once when comparing, in worker processes (default: "
                        "one per CPU core on the numpy backend, 1 on a GPU); the results are "
                        "bit-identical for any value")
    t.set_defaults(func=_train)


def _add_kernels(*parsers: argparse.ArgumentParser) -> None:
    for p in parsers:
        p.add_argument("--kernels", choices=["compiled", "numpy"], default=None,
                       help="kernels to run: compiled (numba; the default where installed) or "
                            "numpy (the specification; same bits); also AMPREF_KERNELS")


def _select_kernels(name: str | None) -> None:
    """Apply ``--kernels`` to this process and, through AMPREF_KERNELS, its workers."""
    if name is None:
        return
    from ampref.kernels import switch

    switch.set_kernels(name)
    os.environ[switch.ENV] = name


def build_parser() -> argparse.ArgumentParser:
    ap = _OneLineParser(prog="ampref", description="ampref: the AMP numerics reference")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_OneLineParser)
    _add_verify(sub)
    add_certify(sub)
    _add_train(sub)
    _add_kernels(*(p for name, p in sub.choices.items() if name in ("train", "verify")))
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        if getattr(args, "format", None) is not None:
            get_format(args.format)
        _select_kernels(getattr(args, "kernels", None))
        return int(args.func(args))
    except (ValueError, TypeError, OSError) as e:
        print(f"ampref {args.command}: error: {e}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"ampref {args.command}: error: out of memory; choose a smaller configuration",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ampref {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
