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
    return ap


def main(argv: list[str] | None = None) -> int:
    ap = build_parser()
    args = ap.parse_args(argv)
    try:
        if getattr(args, "format", None) is not None:
            get_format(args.format)
        return int(args.func(args))
    except (ValueError, TypeError) as e:
        print(f"ampref {args.command}: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
