"""Every scaler profile on one shared overflow sequence with overflows in the middle of a
growth count, hysteresis credit, the floor and growth towards infinity: traces derived by
hand from each framework's source as ../shared/reference/frameworks-amp-semantics.md
transcribes it (not from ampref), and pairwise different, so a profile that borrowed
another's rule would fail here (SCL-PRF-*, SCL-GRW-*, SCL-HYS-*, SCL-FLR-*)."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from ampref.scaling.machine import ScaleFloorError
from ampref.scaling.profiles import PROFILES
from ampref.scaling.scaler import LossScaler

# '.' clean, 'x' overflow. Interval 3: overflows at steps 3 and 8 come with the growth
# count at 2 and 1; steps 10-13 and the last five overflow in a row (hysteresis, floor).
MIDCOUNT = "..x....x.xxxx......xxxxx"
MID = {"init_scale": 16.0, "growth_interval": 3}
# interval 1 from 2^126: growth reaches 2^128, beyond float32 (refused or not, capped)
TOWARD_INF = "..."
INF = {"init_scale": 2.0**126, "growth_interval": 1}
inf = math.inf

# profile -> (extra overrides, trace of MIDCOUNT, trace of TOWARD_INF); a trace ending in
# "raise" means the framework raises at its floor on that step.
EXPECTED: dict[str, tuple[dict[str, Any], list[Any], list[Any]]] = {
    # torch: tracker + 1 == interval grows, any overflow halves and zeroes the tracker,
    # no floor; 2^128 is inf in float32 and refused
    "torch": ({}, [16, 16, 8, 8, 8, 16, 16, 8, 8, 4, 2, 1, .5, .5, .5, 1, 1, 1, 2,
                   1, .5, .25, .125, .0625], [2.0**127] * 3),
    # tf-keras: good_steps + 1 >= growth_steps; max(scale / 2, 1); grows only if finite
    "tf-keras": ({}, [16, 16, 8, 8, 8, 16, 16, 8, 8, 4, 2, 1, 1, 1, 1, 2, 2, 2, 4,
                      2, 1, 1, 1, 1], [2.0**127] * 3),
    # Keras 3: as torch on this sequence, but doubles with no finiteness check
    "keras3": ({}, [16, 16, 8, 8, 8, 16, 16, 8, 8, 4, 2, 1, .5, .5, .5, 1, 1, 1, 2,
                    1, .5, .25, .125, .0625], [2.0**127, inf, inf]),
    # jmp with factor 4: counter mod period, backoff divides by the factor, floor 1,
    # growth refused when not finite (2^126 * 4 = 2^128)
    "jmp": ({"growth_factor": 4.0}, [16, 16, 4, 4, 4, 16, 16, 4, 4, 1, 1, 1, 1, 1, 1, 4, 4,
                                     4, 16, 4, 1, 1, 1, 1], [2.0**126] * 3),
    # Apex: as torch, Python floats, growth capped at 2^24 (the start too)
    "apex": ({}, [16, 16, 8, 8, 8, 16, 16, 8, 8, 4, 2, 1, .5, .5, .5, 1, 1, 1, 2,
                  1, .5, .25, .125, .0625], [2.0**24] * 3),
    # DeepSpeed: stable = iter - last_overflow - 1 > 0 and stable % window == 0 grows (the
    # first growth on the (window+1)-th clean step); hysteresis 2 refilled at growth;
    # raises when asked to back off at the minimum 1; float64 (2^128 is finite)
    "deepspeed": ({}, [16, 16, 16, 16, 16, 16, 32, 32, 32, 16, 8, 4, 2, 2, 2, 2, 4, 4, 4,
                       4, 2, 1, "raise"], [2.0**126, 2.0**127, 2.0**128]),
    # DeepSpeed consecutive: every clean step refills the hysteresis
    "deepspeed-consecutive": ({}, [16, 16, 16, 16, 16, 16, 32, 32, 32, 32, 16, 8, 4, 4, 4,
                                   4, 8, 8, 8, 8, 4, 2, 1, "raise"],
                              [2.0**126, 2.0**127, 2.0**128]),
    # Megatron: tracker == interval grows and refills hysteresis 2; an overflow zeroes the
    # tracker and spends hysteresis; max(scale * 1/2, 1); float32 with no inf check
    "megatron": ({}, [16, 16, 16, 16, 16, 32, 32, 32, 32, 16, 8, 4, 2, 2, 2, 4, 4, 4, 8,
                      8, 4, 2, 1, 1], [2.0**127, inf, inf]),
}


def _trace(profile: str, flags: str, **kw: Any) -> list[Any]:
    s = LossScaler.from_profile(profile, **kw)
    out: list[Any] = []
    for f in flags:
        try:
            s.update(found_inf=f == "x")
        except ScaleFloorError:
            out.append("raise")
            break
        out.append(s.scale)
    return out


@pytest.mark.clause("SCL-PRF-001", "SCL-PRF-002", "SCL-PRF-003", "SCL-PRF-004",
                    "SCL-PRF-005", "SCL-PRF-006", "SCL-PRF-007", "SCL-PRF-008",
                    "SCL-GRW-001", "SCL-GRW-002", "SCL-GRW-003", "SCL-GRW-004",
                    "SCL-GRW-005", "SCL-HYS-001", "SCL-HYS-002")
@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_each_profile_follows_its_frameworks_trace_with_overflows_mid_count(
        profile: str) -> None:
    """Inputs: the profile from 16 with interval 3 (jmp: factor 4) on the flags
    ``..x....x.xxxx......xxxxx``, and from 2^126 with interval 1 on three clean steps.
    Expected: the scales hand-derived from the framework's source (table above).
    Pass: both traces equal step for step."""
    extra, mid, toward_inf = EXPECTED[profile]
    assert _trace(profile, MIDCOUNT, **MID, **extra) == mid
    assert _trace(profile, TOWARD_INF, **INF, **extra) == toward_inf


@pytest.mark.clause("SCL-PRF-000")
def test_the_expected_traces_tell_every_pair_of_profiles_apart() -> None:
    """Inputs: the expected traces of every profile. Expected: every pair differs in at
    least one step (so the trace test distinguishes any profile from any other), and
    every profile has a row. Pass: both."""
    assert set(EXPECTED) == set(PROFILES)
    for a, b in itertools.combinations(EXPECTED, 2):
        assert EXPECTED[a][1:] != EXPECTED[b][1:], f"{a} and {b} have the same traces"
