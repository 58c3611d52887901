"""Which accumulation model does a black-box GEMM follow? (``specs/accumulation.md``
ACC-IDN-001)

GEMMs of one input format disagree in how they add the products: one rounding per
addition in k order (``sequential``), a pairwise tree, a chain of FMAs, the exact sum
rounded once, or a tensor core's block FMA with its GPU's block size, fraction bits,
alignment floor and conventions (``tensorcore:<gpu>`` with ampref's or MMA-Sim's
:class:`~ampref.accumulation.gpus.Rules`). :func:`identify_gemm` runs a fixed battery of
operand pairs through ``fn(a, b) -> float32 (M, N)`` and names every model that gives the
same bits, or the closest one and its first differing element.

The battery (8 x 64 @ 64 x 8 per pair, values of the input format): seeded normal values;
products spread over 30 binades (alignment truncation shows); rows that cancel to a small
remainder (the order of the additions shows); a large leading product followed by small
ones (a block's alignment to its maximum shows); zeros among tiny values and an all −0
row (the zero-exponent rule and the sign of a zero result); products of tiny values far
below the GPU's minimum alignment exponent (the alignment floor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ampref.formats.cast import quantize
from ampref.formats.table import get_format

from .gpus import FAMILY, GPUS
from .models import matmul
from .registry import CLASSIC, LIBRARY_GPUS

__all__ = ["GemmIdentification", "gemm_battery", "gemm_candidates", "identify_gemm",
           "run_candidate"]


@dataclass(frozen=True, kw_only=True)
class GemmIdentification:
    """Matching models, else the closest and its first differing element."""

    input_format: str
    matches: tuple[str, ...]
    closest: str
    mismatches: int
    #: (pair, row, column, got hex, want hex) of the closest model's first miss
    first: tuple[int, int, int, str, str] | None = None

    def __str__(self) -> str:
        head = f"identify_gemm({self.input_format}): "
        if self.matches:
            return head + "matches " + "; ".join(self.matches)
        p, i, j, got, want = self.first or (0, 0, 0, "", "")
        return (head + f"no model explains every element; closest: {self.closest} "
                f"({self.mismatches} mismatches); first: pair {p}, element ({i}, {j}) gave "
                f"{got}, that model gives {want}")


def gemm_battery(input_format: str, *, seed: int = 0, k: int = 64
                 ) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """The fixed operand pairs (values of ``input_format``, as float64)."""
    f = get_format(input_format)
    rng = np.random.default_rng(seed)
    top = min(f.max, 2.0**30) ** 0.5  # products stay finite in float32

    def q(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        with np.errstate(over="ignore"):
            return np.asarray(quantize(np.clip(x, -top, top), f, saturate=True), np.float64)

    spread = rng.standard_normal((8, k)) * np.exp2(rng.integers(-15, 15, (8, k)))
    cancel = rng.standard_normal((8, k))
    cancel[:, k // 2:] = -cancel[:, :k // 2]
    cancel[:, -1] = 2.0**-6
    lead = rng.standard_normal((8, k)) * 2.0**-8
    lead[:, 0] = 2.0**6
    b = q(rng.standard_normal((k, 8)))
    # zeros among tiny values (whether a zero takes part in a block's alignment; the
    # alignment floor), and an all -0 row (the sign of a zero result)
    zeros = rng.standard_normal((8, k)) * np.exp2(rng.integers(-30, -10, (8, k)))
    zeros[:, ::2] = 0.0
    zeros[0] = -0.0
    zeros[1, 1::2] *= 2.0**12
    # products far below 2^-40, where a GPU's minimum alignment exponent truncates them
    half = int(np.log2(f.smallest_subnormal)) // 2
    tiny = rng.uniform(0.5, 1, (8, k)) * np.exp2(rng.integers(half - 4, half + 4, (8, k)))
    return [(q(rng.standard_normal((8, k))), b), (q(spread), q(rng.standard_normal((k, 8)))),
            (q(cancel), q(np.ones((k, 8)) + rng.integers(0, 2, (k, 8)) * 2.0**-7)),
            (q(lead), b), (q(zeros), np.abs(b)), (q(tiny), q(tiny.T))]


#: split-K slice counts offered for long K (ACC-LIB-006; the H100 recordings used 2..32,
#: and 128 once, for an 8x8192x8 SGEMM)
SPLIT_COUNTS = tuple(range(2, 33))


def gemm_candidates(input_format: str, output_format: str = "float32", *, k: int = 64
                    ) -> list[tuple[str, dict[str, Any]]]:
    """(label, matmul keywords) of every model that takes ``input_format`` and writes
    ``output_format``: the classic models, each tensor-core instruction model (ampref's
    and MMA-Sim's rules; for a 16-bit output both its 16-bit accumulator mode and the
    float32 chain rounded once into the output, keyword ``round_to``), and each library
    model (``cublas:<gpu>``, with ``:fast-accum`` for FP8 and ``:tf32`` for float32, and
    with ``:split-k=S`` for S in :data:`SPLIT_COUNTS` where ``k`` spans more than one
    split granule: 128 products, TF32 4, SGEMM 8). Every candidate runs on a probe
    first; one that refuses these formats is left out."""
    fin, fout = get_format(input_format), get_format(output_format)
    out: list[tuple[str, dict[str, Any]]] = [(m, {"accumulation": m}) for m in CLASSIC]
    if FAMILY.get(fin.name) is not None:
        for name, gpu in GPUS.items():
            if fin.name not in gpu.inputs:
                continue
            for rules in ("ampref", "mmasim"):
                kw = {"accumulation": f"tensorcore:{name}", "rules": rules}
                out.append((f"tensorcore:{name}, rules={rules}", kw))
                if fout.name in ("float16", "bfloat16"):
                    out.append((f"tensorcore:{name}, rules={rules}, float32 rounded once to "
                                f"{fout.name}", {**kw, "round_to": fout.name}))
    for lib in LIBRARY_GPUS:
        option = {"float32": ":tf32"}.get(fin.name, ":fast-accum" if fin.name.startswith(
            "float8") else "")  # float32: also the TF32 kernels; FP8: fast accumulation
        names = [f"cublas:{lib}"] + ([f"cublas:{lib}{option}"] if option else [])
        for name in names:
            kernels = "tf32" if name.endswith(":tf32") else fin.name
            splits = SPLIT_COUNTS if k > LIBRARY_GPUS[lib].granule(kernels) else ()
            out.append((name, {"accumulation": name}))
            out.extend((f"{name}:split-k={n}", {"accumulation": f"{name}:split-k={n}"})
                       for n in splits)
    probe = np.zeros((1, 1))
    usable = []
    for label, kw in out:
        full = {**kw, "input_format": fin.name, "output_format": output_format}
        try:
            run_candidate(probe, probe, full)
        except ValueError:  # the model does not take these formats
            continue
        usable.append((label, full))
    return usable


def run_candidate(a: Any, b: Any, kw: dict[str, Any]) -> npt.NDArray[np.float32]:
    """One candidate's GEMM: ``matmul(**kw)``, or with ``round_to`` the float32 result
    rounded once (nearest-even) into that format."""
    kw = dict(kw)
    target = kw.pop("round_to", None)
    if target is not None:
        kw["output_format"] = "float32"
    r = np.asarray(matmul(a, b, **kw), np.float32)
    return r if target is None else np.asarray(quantize(r, target), np.float32)


def _same(a: npt.NDArray[Any], b: npt.NDArray[Any]) -> npt.NDArray[np.bool_]:
    a32, b32 = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return (a32.view(np.uint32) == b32.view(np.uint32)) | (np.isnan(a32) & np.isnan(b32))


def _hex(v: Any) -> str:
    return f"0x{int(np.asarray(v, np.float32).view(np.uint32)):08x}"


def identify_gemm(fn: Callable[[Any, Any], Any], input_format: str, *,
                  output_format: str = "float32", seed: int = 0,
                  k: int = 64) -> GemmIdentification:
    """Run ``fn(a, b)`` (float64 arrays holding ``input_format`` values -> float32
    (M, N)) on :func:`gemm_battery` with inner dimension ``k`` and name every
    accumulation model that matches. A long ``k`` (thousands) exposes split-K library
    kernels, which are then among the candidates.

    Raises:
        TypeError: ``fn`` is not callable.
        ValueError: unknown format, ``k`` not an int in 1..65536, or ``fn`` returns
            another shape.
    """
    if not callable(fn):
        raise TypeError(f"identify_gemm needs a callable, got {type(fn).__name__}")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 65536:
        raise ValueError(f"k must be an int in 1..65536 (the battery's inner dimension), "
                         f"got {k!r}")
    pairs = gemm_battery(input_format, seed=seed, k=k)
    got = []
    for a, b in pairs:
        with np.errstate(all="ignore"):
            r = np.asarray(fn(a.copy(), b.copy()), np.float32)
        if r.shape != (a.shape[0], b.shape[1]):
            raise ValueError(f"fn returned shape {r.shape} for {a.shape} @ {b.shape}")
        got.append(r)
    best: tuple[int, str, Any] | None = None
    matches = []
    for label, kw in gemm_candidates(input_format, output_format, k=k):
        want = [run_candidate(a, b, kw) for a, b in pairs]
        ok = [_same(g, w) for g, w in zip(got, want, strict=True)]
        bad = sum(int((~o).sum()) for o in ok)
        if bad == 0:
            matches.append(label)
        if best is None or bad < best[0]:
            best = (bad, label, (ok, want))
    assert best is not None  # MODELS is never empty
    bad, closest, (ok, want) = best
    first = None
    if bad:
        p = next(i for i, o in enumerate(ok) if not o.all())
        i, j = (int(v) for v in np.argwhere(~ok[p])[0])
        first = (p, i, j, _hex(got[p][i, j]), _hex(want[p][i, j]))
    return GemmIdentification(input_format=get_format(input_format).name, matches=tuple(matches),
                              closest=closest, mismatches=bad, first=first)
