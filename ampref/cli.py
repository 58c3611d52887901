"""Command line: ``ampref verify``, ``ampref certify`` and ``ampref train`` (the last two's
arguments and actions live in :mod:`ampref.certify.command` and
:mod:`ampref.training.command`).

Every error, argparse's included, is one line on stderr and exit status 2 (TRN-ERR-001).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, NoReturn

from ampref.certify.command import add_certify
from ampref.common.checks import flag_items
from ampref.training.command import add_train
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
    formats = flag_items(args.matrix, "--matrix")
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
    add_train(sub)
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
