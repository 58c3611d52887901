"""The ``ampref train`` command: its arguments (one per TrainConfig field, and the
comparison, resume and data-parallel flags), each combination checked with a one-line
message before anything trains (TRN-ERR-001), and its actions: one run, a resumed run, a
comparison of modes, a comparison of data-parallel semantics.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from ampref.common.checks import flag_items

__all__ = ["add_train"]


# train flags that map one to one onto TrainConfig fields
_TRAIN_FIELDS = ("steps", "seed", "batch", "context", "width", "heads", "blocks", "lr", "profile",
                 "static_scale", "inject_nonfinite", "checkpoint_every", "data", "backend",
                 "recipe_profile", "ranks", "reduce_dtype")


def _plants(values: list[str] | None) -> tuple[tuple[int, int], ...]:
    """``--plant-overflow 30@2 41@0`` (or ``30@2,41@0``) as ((30, 2), (41, 0))."""
    out = []
    for item in flag_items(values, "--plant-overflow"):
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
    dps = None if args.dp is None else flag_items(args.dp, "--dp")
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
        list(DEFAULT_COMPARE) if not args.compare else flag_items(args.compare, "--compare"))
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


def add_train(sub: Any) -> None:
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
    helps = {"steps": "training steps",
             "seed": "seed of weights, data order and dropout, in [0, 2^32)",
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
