"""identify_scaler names the framework whose scale-update rules a black box follows
(SCL-IDN-001). Oracles: torch's own `_amp_update_scale_` kernel (live), a textbook scaler
written in tests/planted.py, and every profile planted as a black box, which must be named
together with exactly the profiles that give the same trajectory on the battery."""

from __future__ import annotations

import inspect
from dataclasses import replace

import pytest

from ampref.scaling.identify import identify_scaler, scaler_battery, trajectory
from ampref.scaling.profiles import PROFILES
from planted import textbook_scaler

INIT, G = 2.0**16, 3


def _cfg(name: str):  # type: ignore[no-untyped-def]
    return replace(PROFILES[name].config, init_scale=INIT, growth_interval=G)


@pytest.mark.clause("SCL-IDN-001")
@pytest.mark.parametrize("name", sorted(PROFILES))
def test_every_profile_is_named_with_exactly_the_profiles_equal_to_it(name: str) -> None:
    """Inputs: each profile's trajectory on the scaler battery planted as the function
    under test. Expected: identify_scaler names it with exactly the profiles whose
    trajectories coincide (at most two: tf-keras and jmp). Pass: equal sets."""
    flags = scaler_battery(INIT, G)
    mine = trajectory(_cfg(name), flags)
    twins = {n for n in PROFILES if trajectory(_cfg(n), flags) == mine}
    got = identify_scaler(lambda f: trajectory(_cfg(name), f), init_scale=INIT, growth_interval=G)
    assert set(got.matches) == twins and name in got.matches, str(got)
    assert len(twins) <= 2  # only tf-keras and jmp coincide (factors 2 and 1/2)


@pytest.mark.clause("SCL-IDN-001")
def test_torchs_own_update_kernel_is_named_torch() -> None:
    """Inputs: torch's _amp_update_scale_ driven by the battery's flags. Expected:
    identified as torch only. Pass: equal."""
    torch = pytest.importorskip("torch")

    def kernel(flags: list[bool]) -> list[float]:
        scale, tracker, out = torch.full((), INIT), torch.zeros((), dtype=torch.int32), []
        for f in flags:
            torch._amp_update_scale_(scale, tracker, torch.full((), float(f)), 2.0, 0.5, G)
            out.append(float(scale))
        return out

    assert identify_scaler(kernel, init_scale=INIT, growth_interval=G).matches == ("torch",)


@pytest.mark.clause("SCL-IDN-001")
def test_the_default_scale_and_interval_are_torchs_gradscaler_defaults() -> None:
    """Inputs: identify_scaler's defaults and the installed torch.amp.GradScaler's (the
    oracle). Expected: init_scale 2^16 and growth_interval 2000 in both, so a scaler
    written against torch's defaults is identified without passing them. Pass: equal."""
    torch = pytest.importorskip("torch")
    ours = inspect.signature(identify_scaler).parameters
    theirs = inspect.signature(torch.amp.GradScaler).parameters
    for name in ("init_scale", "growth_interval"):
        assert ours[name].default == theirs[name].default, name


@pytest.mark.clause("SCL-IDN-001")
def test_a_textbook_float32_scaler_is_torch_and_a_float64_one_no_profile() -> None:
    """Inputs: a textbook scaler in float32 and in float64. Expected: torch for the first;
    no match for the second, whose first difference is a growth beyond float32's range.
    Pass: both."""
    ok = identify_scaler(lambda f: textbook_scaler(f, init=INIT, interval=G),
                         init_scale=INIT, growth_interval=G)
    assert ok.matches == ("torch",)
    wide = identify_scaler(lambda f: textbook_scaler(f, init=INIT, interval=G, float32=False),
                           init_scale=INIT, growth_interval=G)
    assert wide.matches == () and wide.first is not None
    step, found, got, want = wide.first
    assert not found and got is not None and got > 3.4e38  # grew past float32's range
    assert "first: update" in str(wide)


@pytest.mark.clause("SCL-IDN-001", "API-ERR-001")
def test_identify_scaler_refuses_non_callables_and_bad_parameters() -> None:
    """Inputs: a list instead of a function; growth_interval 0. Expected: TypeError and
    ValueError. Pass: both."""
    with pytest.raises(TypeError, match="needs a callable"):
        identify_scaler([1.0])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="growth_interval"):
        identify_scaler(lambda f: [], growth_interval=0)


@pytest.mark.clause("SCL-IDN-001")
def test_a_scaler_that_raises_early_is_named_by_its_first_missing_update() -> None:
    """Inputs: the textbook float32 scaler (torch's rules) cut after 50 updates, as if it
    raised at update 51; and DeepSpeed's trajectory (which raises at its floor) continued
    by the floor value for 3 more updates. Expected: no match for either; the first names
    update 51 with got None and torch's value there, and update len(deepspeed) + 1 with
    deepspeed's missing value; both print "no value (raised)". Pass: as stated."""
    flags = scaler_battery(INIT, G)
    short = identify_scaler(lambda f: textbook_scaler(f, init=INIT, interval=G)[:50],
                            init_scale=INIT, growth_interval=G)
    want = trajectory(_cfg("torch"), flags)
    assert short.matches == () and short.closest == "torch"
    assert short.first == (51, flags[50], None, want[50])
    assert "gave no value (raised)" in str(short)
    ds = trajectory(_cfg("deepspeed"), flags)
    assert len(ds) < len(flags)  # it raises at the floor: the battery reaches it
    longer = identify_scaler(lambda f: ds + [ds[-1]] * 3, init_scale=INIT, growth_interval=G)
    assert longer.matches == () and longer.closest == "deepspeed"
    assert longer.first == (len(ds) + 1, flags[len(ds)], ds[-1], None)
    assert "that profile gives no value (raised)" in str(longer)
