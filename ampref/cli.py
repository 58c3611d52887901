"""Command line: ``ampref verify`` (and, as they land, the other jobs)."""

from __future__ import annotations

import argparse
import sys

from .formats import FORMATS, get_format
from .rounding import RoundingMode


def _verify(args: argparse.Namespace) -> int:
    from .verify import summary, verify

    res = verify(args.format, args.rounding, stride=args.stride, saturate=args.saturate,
                 subnormals=not args.no_subnormals, seed=args.seed, workers=args.workers,
                 progress=not args.quiet)
    print(summary(res))
    return 0 if res.ok else 1


def _train(args: argparse.Namespace) -> int:
    from .train import DEFAULT_COMPARE, MODES, TrainConfig, compare, compare_table, train

    cfg = TrainConfig(precision=args.precision or "amp-fp16", steps=args.steps, seed=args.seed,
                      batch=args.batch, context=args.context, width=args.width, heads=args.heads,
                      blocks=args.blocks, lr=args.lr, profile=args.profile,
                      static_scale=args.static_scale, inject_nonfinite=args.inject_nonfinite,
                      checkpoint_every=args.checkpoint_every, data=args.data, backend=args.backend)
    report = not args.no_report
    if args.precision is not None and args.compare is None:
        summary = train(cfg, args.out, resume=args.resume, progress=not args.quiet, report=report)
        print(compare_table([summary]))
        print(f"outputs in {args.out}/ ({'report.md, ' if report else ''}metrics.json, final.npz)")
        return 0
    if args.resume:
        raise ValueError("--resume continues one mode: give --precision MODE (with the same --out)")
    modes = list(DEFAULT_COMPARE) if not args.compare else [m.strip() for m in args.compare.split(",")]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"unknown precision mode(s) {', '.join(unknown)}; choose from {', '.join(MODES)}")
    rows = compare(cfg, modes, args.out, progress=not args.quiet, report=report)
    print(compare_table(rows))
    print(f"outputs in {args.out}/ (compare.json, compare.md, compare.png, one folder per mode)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="ampref", description="ampref: the AMP numerics reference")
    sub = ap.add_subparsers(dest="command", required=True)
    v = sub.add_parser("verify", help="exhaustive float32 -> format rounding certificate",
                       description="Round every float32 bit pattern (or every --stride-th) "
                       "and compare bit for bit with independent implementations.")
    v.add_argument("--format", default="float16",
                   help=f"target format (default float16); one of {', '.join(FORMATS)} or an alias")
    v.add_argument("--rounding", default="nearest_even", choices=[m.value for m in RoundingMode])
    v.add_argument("--stride", type=int, default=1, help="check every N-th pattern (default 1: all 2^32)")
    v.add_argument("--saturate", action="store_true")
    v.add_argument("--no-subnormals", action="store_true")
    v.add_argument("--seed", type=int, default=0, help="seed for stochastic rounding")
    v.add_argument("--workers", type=int, default=2)
    v.add_argument("--quiet", action="store_true", help="no progress bar")
    v.set_defaults(func=_verify)

    from .scaling import PROFILES
    from .train import DEFAULT_COMPARE, MODES, TrainConfig

    d = TrainConfig()
    t = sub.add_parser("train", help="small from-scratch AMP training with a numerics report",
                       description="Train a character-level transformer on embedded text. Without "
                       f"--precision it compares {', '.join(DEFAULT_COMPARE)} with the same seed and data order.")
    t.add_argument("--precision", choices=list(MODES), default=None,
                   help="train one mode (default: compare several)")
    t.add_argument("--compare", nargs="?", const="", default=None, metavar="MODES",
                   help=f"comma-separated modes to compare (default {','.join(DEFAULT_COMPARE)})")
    t.add_argument("--steps", type=int, default=d.steps)
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--out", default="runs/train", help="output folder (default runs/train)")
    t.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    t.add_argument("--backend", default="numpy", choices=["numpy", "cupy"])
    t.add_argument("--profile", default=d.profile, choices=list(PROFILES), help="loss-scaler profile for amp-fp16")
    t.add_argument("--static-scale", type=float, default=d.static_scale, help="scale of fp16-static")
    t.add_argument("--inject-nonfinite", type=float, default=0.0, metavar="RATE",
                   help="plant inf/NaN in the gradients of a seeded fraction of steps")
    t.add_argument("--checkpoint-every", type=int, default=d.checkpoint_every)
    t.add_argument("--batch", type=int, default=d.batch)
    t.add_argument("--context", type=int, default=d.context)
    t.add_argument("--width", type=int, default=d.width)
    t.add_argument("--heads", type=int, default=d.heads)
    t.add_argument("--blocks", type=int, default=d.blocks)
    t.add_argument("--lr", type=float, default=d.lr)
    t.add_argument("--data", default=None, help="a UTF-8 text file instead of the embedded text")
    t.add_argument("--no-report", action="store_true", help="skip the plots and report.md")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    t.set_defaults(func=_train)
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        if getattr(args, "format", None) is not None:
            get_format(args.format)
        return int(args.func(args))
    except (ValueError, TypeError, OSError) as e:
        print(f"ampref {args.command}: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ampref {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
