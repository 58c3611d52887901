"""``scripts/bridge_models.py``, the real-model check of the bridge (TRC-AUT-001,
TRC-EMU-005), on a model of ``zoo.py`` in channels-last layout (torchvision, timm and
transformers are not test dependencies): equal logs where the bridge is right, the
first differing op where a layout rule is planted wrong, one line and exit 2 for an
unknown model."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")

import zoo  # noqa: E402
from paths import script  # noqa: E402


def _script() -> Any:
    return script("bridge_models")


def _channels_last_resnet() -> tuple[Any, Any, Any]:
    c = zoo.case("resnet")
    model = c.model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]
    return model, c.inputs.to(memory_format=torch.channels_last), lambda m, x: c.loss(m(x))


@pytest.mark.clause("TRC-AUT-001", "TRC-EMU-005")
def test_a_channels_last_resnet_step_logs_like_torch_and_a_wrong_layout_rule_is_found(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: zoo's ResNet and batch in channels-last layout, one training step under
    CPU autocast bf16 and fp16 and under the CUDA lists, through the script's check.
    Expected: both logs equal op for op (dtypes and strides); the CUDA-list step runs
    emulated; with the convolution's layout rule removed from KERNEL_META (a planted
    bug) the first differing op is a convolution. Pass: as stated."""
    mod = _script()
    monkeypatch.setitem(mod.MODELS, "zoo resnet", _channels_last_resnet)
    row = mod.check("zoo resnet")
    for d in ("torch.bfloat16", "torch.float16"):
        assert row[d]["first_difference"] is None and "refused" not in row[d], row[d]
        assert row[d]["ops"] > 100
    assert row["cuda_fp16_emulated"] == "ran, every op emulated"
    import ampref.torch.convert as convert
    monkeypatch.setattr(convert, "KERNEL_META", convert.KERNEL_META - {"convolution"})
    planted = mod.check("zoo resnet")["torch.bfloat16"]
    assert planted["first_difference"] is not None and planted["torch"][0] == "convolution"


class _CachesOnFirstCall(torch.nn.Module):  # type: ignore[misc,name-defined]
    """A linear layer plus a position bias whose index is built once and kept in a cache,
    as BEiT keeps its relative position index in an lru_cache: only the first forward of
    the process runs the arange and stack that build it."""

    cache: dict[int, Any] = {}

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.bias = torch.nn.Parameter(torch.zeros(8))

    def forward(self, x: Any) -> Any:
        if 8 not in self.cache:
            self.cache[8] = torch.stack([torch.arange(8), torch.arange(8)]).sum(0) // 2
        return self.lin(x) + self.bias[self.cache[8]]


def _caching_model() -> tuple[Any, Any, Any]:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    return _CachesOnFirstCall(), x, lambda m, x: m(x).float().square().mean()


@pytest.mark.clause("TRC-AUT-001")
def test_a_model_that_caches_on_its_first_call_logs_equal_in_both_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Input: a fresh-process-like model whose first forward builds an index (arange,
    stack) into a class-level cache and later forwards reuse it, through the script's
    check. Expected: equal logs in bf16 and fp16: the work of the first call is not
    charged to whichever run comes first. Pass: no first difference in either dtype."""
    mod = _script()
    monkeypatch.setattr(_CachesOnFirstCall, "cache", {})
    monkeypatch.setitem(mod.MODELS, "caches", _caching_model)
    row = mod.check("caches")
    for d in ("torch.bfloat16", "torch.float16"):
        assert row[d]["first_difference"] is None and "refused" not in row[d], row[d]


def _fourier_model() -> tuple[Any, Any, Any]:
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(0))
    lin = torch.nn.Linear(8, 8)
    return lin, x, lambda m, x: torch.fft.fft(m(x).float()).real.square().mean()


@pytest.mark.clause("TRC-AUT-001")
def test_a_model_with_an_op_emulate_refuses_is_reported_refused_not_equal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Input: a linear layer followed by a complex FFT (FNet's token mixing), which
    emulate(fallback="error") refuses. Expected: the row of each CPU dtype says refused
    with the aten op's name, and the printed summary says so instead of "equal".
    Pass: as stated."""
    mod = _script()
    monkeypatch.setitem(mod.MODELS, "fourier", _fourier_model)
    row = mod.check("fourier")
    for d in ("torch.bfloat16", "torch.float16"):
        assert "aten._fft_r2c" in row[d]["refused"], row[d]
    assert "equal" not in mod.summary(row) and "refused" in mod.summary(row)


@pytest.mark.clause("TRC-AUT-001")
def test_an_unknown_model_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Input: the script's main with a model name it does not know. Expected: exit
    status 2, one line on stderr naming the bad name and the choices. Pass: as stated."""
    assert _script().main(["no such model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'no such model'" in err[0] and "choices" in err[0]
