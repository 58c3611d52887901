"""What one training step asks of a GPU: array operations (each a kernel launch and a
CuPy dispatch on a device) and host synchronisations, counted without a GPU.

Usage: python benchmarks/device_step_profile.py [--modes fp32 amp-fp16 amp-bf16]
       [--model default|large] [--top 8]

The device backend runs on the strict CuPy stand-in (tests/strictxp.py) with the host
build of the kernels; every operation that makes new data (not a view, not its input
handed back) counts as one launch, every scalar conversion or ``asnumpy`` as one
synchronisation, and so does every operation whose output size depends on the data
(a boolean mask, ``unique``, ``nonzero``: CuPy reads the size back). The third step of the default
model is counted (the first two warm caches), once with the fused exact kernels (kernel
switch ``compiled``, BKD-MM-005) and once with the specification's phases (``numpy``),
side by side. Launch counts bound what a small model costs on a GPU (each costs several
microseconds of CPU time however small), and each synchronisation stops the CPU from
queueing work ahead of the GPU; neither is a GPU time.
"""

from __future__ import annotations

import argparse
import platform
import sys
import weakref
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import strictxp  # noqa: E402
from strict_kernels import StrictHostKernels  # noqa: E402

import ampref  # noqa: E402
from ampref import backends  # noqa: E402
from ampref.backends import hostbuild  # noqa: E402
from ampref.backends.device import DeviceBackend  # noqa: E402


class Tally:
    """Launches and synchronisations by the first ampref frame that asked for them."""

    def __init__(self) -> None:
        self.launches: Counter[str] = Counter()
        self.syncs: Counter[str] = Counter()

@contextmanager
def counting(tally: Tally) -> Iterator[None]:
    """Count on strictxp while the block runs (its functions patched, then restored)."""
    wrap = strictxp._wrap
    seen: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()

    def counted_wrap(v: Any) -> Any:
        out = wrap(v)
        # a launch makes new data: views (reshape, slices, transposes) and an array handed
        # back unchanged (ascontiguousarray of a contiguous one) cost none on a GPU
        if isinstance(out, strictxp.DeviceArray):
            if out._a.base is None and seen.get(id(out._a)) is not out._a:
                # the site below this hook and the strictxp function that made the data
                tally.launches[strictxp.caller_site(2)] += 1
            seen[id(out._a)] = out._a
        return out

    def synced(site: str) -> None:
        tally.syncs[site] += 1

    strictxp._wrap = counted_wrap
    try:
        with strictxp.on_sync(synced):
            yield
    finally:
        strictxp._wrap = wrap


#: the models counted: the default one, and issue 39's larger one (its >= 10x target)
MODELS: dict[str, dict[str, Any]] = {
    "default": {},
    "large": {"width": 256, "blocks": 4, "heads": 8, "context": 128, "batch": 32}}


def profile(mode: str, kernels: str, model: str = "default") -> Tally:
    from ampref.training.config import TrainConfig
    from ampref.training.corpus import Corpus, load_corpus
    from ampref.training.run import Run

    tally = Tally()
    with ampref.use_kernels(kernels):
        # steps=10: the counted third step is not the last, which also keeps histograms
        cfg = TrainConfig(precision=mode, steps=10, backend="cupy-host", **MODELS[model])
        run = Run(cfg, Corpus(load_corpus(None), cfg.context))
        run.step()
        run.step()
        with counting(tally):
            run.step()
    return tally


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modes", nargs="+", default=["fp32", "amp-fp16", "amp-bf16"])
    ap.add_argument("--model", choices=sorted(MODELS), default="default",
                    help="large: width 256, 4 blocks, 8 heads, context 128, batch 32 "
                         "(fused kernels only: its phases column takes minutes)")
    ap.add_argument("--top", type=int, default=8)
    args = ap.parse_args()
    backends.register("cupy-host", DeviceBackend(
        strictxp, StrictHostKernels(hostbuild.HostKernels()), "cupy-host"))
    print(f"device backend on the strict stand-in, {args.model} model, one step; "
          f"{platform.machine()}, Python {platform.python_version()}")
    print(f"{'mode':<10}{'fused: launches':>17}{'syncs':>7}{'phases: launches':>18}"
          f"{'syncs':>7}{'launch ratio':>14}")
    fused = {}
    for mode in args.modes:
        fused[mode] = f = profile(mode, "compiled", args.model)
        fl, fs = sum(f.launches.values()), sum(f.syncs.values())
        if args.model == "default":
            p = profile(mode, "numpy", args.model)
            pl, ps = sum(p.launches.values()), sum(p.syncs.values())
            print(f"{mode:<10}{fl:>17}{fs:>7}{pl:>18}{ps:>7}{pl / fl:>14.2f}")
        else:
            print(f"{mode:<10}{fl:>17}{fs:>7}{'-':>18}{'-':>7}{'-':>14}")
    for mode, f in fused.items():
        print(f"\n{mode}, fused, the most launches by call site:")
        for site, n in f.launches.most_common(args.top):
            print(f"  {n:>5}  {site}")
        print(f"{mode}, fused, synchronisations by call site:")
        for site, n in f.syncs.most_common(args.top):
            print(f"  {n:>5}  {site}")


if __name__ == "__main__":
    main()
