"""``scripts/opinfo_survey.py``, the bridge against torch on torch's OpInfo samples
(TRC-EMU-001, TRC-EMU-005, TRC-AUT-001): its comparison core, on hand-made samples (the
OpInfo database needs torch's test-suite packages, not test dependencies here): equal
logs where the bridge is right, the first differing op where a layout rule is planted
wrong, errors recorded, one line and exit 2 for a bad option."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

from paths import script  # noqa: E402


def _samples() -> list[Any]:
    fn = torch.nn.functional

    def hardswish() -> Any:
        x = torch.linspace(-4, 4, 60).reshape(3, 4, 5).requires_grad_()
        return (lambda t: fn.hardswish(t).permute(2, 1, 0)), x, (), {}

    def mm_twice() -> Any:
        x = torch.linspace(-1, 1, 16).reshape(4, 4).requires_grad_()
        return torch.mm, x, (x,), {}
    return [("hardswish", "torch.float32", hardswish), ("mm", "torch.float32", mm_twice)]


@pytest.mark.clause("TRC-EMU-005", "TRC-AUT-001")
def test_right_rules_give_no_finding_and_a_planted_layout_rule_is_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: hardswish with its output returned permuted and mm(x, x), given and
    reversed, plain and under bf16 autocast. Expected: 4 runs each compared, no finding;
    with hardswish_backward taken out of ELEMENTWISE_BACKWARDS (a planted bug: meta's
    layout again) a finding at hardswish_backward where the input is reversed and its
    gradient arrives contiguous (ones_like keeps the permuted output's layout, so the
    given run's layouts agree). Pass: as stated."""
    mod = script("opinfo_survey")
    for autocast in (None, "bfloat16"):
        got = mod.compare(iter(_samples()), autocast)
        assert (got["compared"], got["findings"]) == (4, []), got
    import ampref.torch.convert as convert
    monkeypatch.setattr(convert, "ELEMENTWISE_BACKWARDS",
                        convert.ELEMENTWISE_BACKWARDS - {"hardswish_backward"})
    convert._META.clear()  # the kernel's layouts were cached per call signature
    found = mod.compare(iter(_samples()[:1]))["findings"]
    assert [(f.op, f.layout) for f in found] == [("hardswish", "reversed")]
    assert "hardswish_backward" in found[0].torch[0]


@pytest.mark.clause("TRC-EMU-001")
def test_an_error_under_emulate_is_a_finding_and_a_refusal_is_counted() -> None:
    """Inputs: a sample whose function raises ValueError only under emulate (it reads
    the mode), and one calling an op ampref refuses (torch.linalg.qr). Expected: the
    first a finding with its error, the second counted as refused in both layouts.
    Pass: as stated."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

    from ampref.torch import emulate
    mod = script("opinfo_survey")

    def picky(t: Any) -> Any:
        if any(isinstance(m, emulate) for m in _get_current_dispatch_mode_stack()):
            raise ValueError("planted")
        return t * 2

    x = torch.ones(2, 3)
    got = mod.compare(iter([("picky", "f32", lambda: (picky, x, (), {})),
                            ("qr", "f32", lambda: (torch.linalg.qr, x, (), {}))]))
    assert [(f.op, f.error) for f in got["findings"]] == [
        ("picky", "ValueError: planted"), ("picky", "ValueError: planted")]
    assert got["refused"] == 2


@pytest.mark.clause("TRC-EMU-001")
def test_an_unknown_autocast_dtype_is_one_line_and_exit_2(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Input: main with --autocast fp8. Expected: exit 2 and one line on stderr naming
    'fp8' and the choices, before any sample is made. Pass: as stated."""
    assert script("opinfo_survey").main(["--autocast", "fp8"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'fp8'" in err[0] and "choices" in err[0]


class _FakeInfo:
    """An OpInfo stand-in: a name, CPU dtypes and samples (torch's own database needs
    its test-suite packages, which CI does not install)."""

    supports_autograd = False

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n

    def supported_dtypes(self, device: str) -> set[Any]:
        return {torch.float32}

    def sample_inputs(self, device: str, dtype: Any, requires_grad: bool) -> list[Any]:
        return [type("S", (), {"input": torch.zeros(k + 1), "args": (), "kwargs": {}})()
                for k in range(self.n)]


@pytest.mark.clause("TRC-EMU-001")
def test_a_misspelt_op_name_is_named_and_known_names_select_their_samples() -> None:
    """Input: a database of ops 'add' (5 samples) and 'mul' (1); names ['add', 'ad']
    and then ['add']. Expected: unknown_names gives ['ad'] (a misspelt name would run
    nothing and read as a clean survey); opinfo_samples for ['add'] yields add's first 3
    samples in float32 only, none of mul's, and from first=3 the remaining 2. Pass: the
    exact lists."""
    mod = script("opinfo_survey")
    db = [_FakeInfo("add", 5), _FakeInfo("mul", 1)]
    assert mod.unknown_names(["add", "ad"], db) == ["ad"]
    assert mod.unknown_names([], db) == []
    got = list(mod.opinfo_samples(["add"], db))
    assert [(op, dt) for op, dt, _ in got] == [("add", "torch.float32")] * 3
    assert [tuple(make()[1].shape) for _, _, make in got] == [(1,), (2,), (3,)]
    later = list(mod.opinfo_samples(["add"], db, per_op=3, first=3))
    assert [tuple(make()[1].shape) for _, _, make in later] == [(4,), (5,)]
    # float64 is asked for but the op does not support it: float32 only
    both = list(mod.opinfo_samples(["add"], db, per_op=1, dtypes=("float64", "float32")))
    assert [dt for _, dt, _ in both] == ["torch.float32"]


@pytest.mark.clause("TRC-EMU-001")
@pytest.mark.parametrize("argv", [["--per-op", "0"], ["--first", "-1"],
                                  ["--dtypes", "float8"], ["--dtypes", ","]])
def test_a_bad_sample_range_is_one_line_and_exit_2(argv: list[str],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Input: --per-op 0, --first -1, --dtypes float8 and an empty list. Expected: exit 2
    and one line on stderr naming the option (and for dtypes the choices), before
    torch's database is read. Pass: as stated."""
    assert script("opinfo_survey").main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and argv[0] in err[0]
    if argv[0] == "--dtypes":
        assert "float16" in err[0] and "float64" in err[0]
