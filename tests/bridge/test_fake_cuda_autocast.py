"""ampref's CUDA lists against torch's real CUDA autocast read without a GPU (TRC-AUT-002).

Data: ``tests/data/autocast_fake_cuda_zoo.json``, written by
``scripts/fake_cuda_autocast.py --record`` with a CUDA build of torch (2.14.1+cu130) on a
machine without a GPU: the zoo models' forward pass and loss on fake CUDA tensors
through torch's real ``AutocastCUDA`` kernels, reduced to what autocast decides (every
cast between floating dtypes, in order; every op the CUDA policy lists, with its input
and output dtypes; attention as one entry). The GPT and the metric model never ran on
the H100 (``autocast_traces_cuda_h100.json``): here they are compared for the first
time. The oracle itself is checked against the H100 on the models both ran."""

from __future__ import annotations

import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ampref.torch")

from paths import DATA, script  # noqa: E402

RECORD = json.loads((DATA / "autocast_fake_cuda_zoo.json").read_text())
H100 = json.loads((DATA / "autocast_traces_cuda_h100.json").read_text())["traces"]
SURVEY = script("fake_cuda_autocast")


def _plain(x: Any) -> Any:
    """Tuples as JSON gives them back: lists."""
    return json.loads(json.dumps(x))


@pytest.mark.clause("TRC-AUT-002")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(RECORD["models"]))
def test_the_zoo_forward_casts_as_torchs_cuda_autocast_read_on_fake_cuda_tensors(
        name: str, dtype: str) -> None:
    """TRC-AUT-002. Inputs: one zoo model's seeded forward pass and loss on CPU tensors
    under ampref.torch.autocast("cuda", dtype). Expected: the recorded casts (source dtype,
    shape, target dtype, in order) and listed ops (name, input and output dtypes) of
    torch's CUDA autocast. Pass: both lists equal element for element."""
    got = SURVEY.compared(SURVEY.on_ampref(SURVEY.MODELS[name], getattr(torch, dtype)),
                          SURVEY.listed_ops())
    want = RECORD["models"][name][dtype]
    for part in ("casts", "listed"):
        a, b = _plain(got[part]), want[part]
        first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y),
                     None if len(a) == len(b) else min(len(a), len(b)))
        assert first is None, (part, first, a[first:first + 2], b[first:first + 2])


@pytest.mark.clause("TRC-AUT-002")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["mlp", "cnn", "resnet", "transformer"])
def test_the_fake_cuda_oracle_agrees_with_the_h100_on_the_models_both_ran(
        name: str, dtype: str) -> None:
    """TRC-AUT-002, the oracle's own check. Inputs: the fake-CUDA record and the H100's
    training step (torch 2.11) of one model. Expected: the H100's policy-listed ops, in
    order, begin with the record's forward ones (attention, one entry in the record,
    is a fused cuDNN kernel on the H100 and left out), with the same output dtypes.
    Pass: equal prefixes."""
    fake = [[n, outs] for n, _, outs in RECORD["models"][f"zoo:{name}"][dtype]["listed"]
            if n != "scaled_dot_product_attention"]
    listed = SURVEY.listed_ops()
    h100 = [[op, [d.removeprefix("torch.") for d in outs]]
            for op, outs, _ in H100[f"{name}|{dtype}"] if op in listed]
    assert fake and h100[:len(fake)] == fake, (fake, h100[:len(fake)])
