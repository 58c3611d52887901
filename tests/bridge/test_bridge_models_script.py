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
        assert row[d]["first_difference"] is None, row[d]
        assert row[d]["ops"] > 100
    assert row["cuda_fp16_emulated"] == "ran, every op emulated"
    import ampref.torch.convert as convert
    monkeypatch.setattr(convert, "KERNEL_META", convert.KERNEL_META - {"convolution"})
    planted = mod.check("zoo resnet")["torch.bfloat16"]
    assert planted["first_difference"] is not None and planted["torch"][0] == "convolution"


@pytest.mark.clause("TRC-AUT-001")
def test_an_unknown_model_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """Input: the script's main with a model name it does not know. Expected: exit
    status 2, one line on stderr naming the bad name and the choices. Pass: as stated."""
    assert _script().main(["no such model"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'no such model'" in err[0] and "choices" in err[0]
