"""A CUDA AMP script on a CPU-only machine: ampref's CUDA lists against torch's CUDA
autocast recorded on an H100, and the script's own ``torch.autocast("cuda")`` and
``torch.amp.GradScaler("cuda")`` calls inside ``emulate`` against a real CUDA GradScaler
run recorded there (TRC-AUT-002, TRC-CUD-001, TRC-CUD-002; data:
tests/data/autocast_torch_cuda.json, its provenance inside)."""

from __future__ import annotations

import json
import warnings
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

from ampref.formats.peers import release  # noqa: E402
from ampref.policy.policies import load_policy  # noqa: E402
from paths import DATA, script  # noqa: E402

RECORD = json.loads((DATA / "autocast_torch_cuda.json").read_text())
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _cases() -> Any:
    return script("record_autocast_table")


@pytest.mark.clause("TRC-AUT-002")
def test_cuda_lists_on_cpu_tensors_give_the_dtypes_torch_gave_on_an_h100() -> None:
    """Input: the 172 rows recorded with torch 2.11 on an H100 (op, autocast dtype, input
    dtypes), each case run on CPU tensors under ampref.torch.autocast("cuda", dtype).
    Expected: the recorded output dtype, or an error where torch raised one (the banned
    binary_cross_entropy); 12 rows whose recording failed carry torch's documented class;
    rms_norm, fp32 only since torch 2.12 (the policy's listed_since), has its input's dtype
    in the 2.11 record and float32 here. Pass: every row as stated."""
    rec = _cases()
    cases = rec.cases()
    # ampref states torch 2.13's lists; rows added since the recorded 2.11 differ by design
    pol = load_policy("torch-cuda")
    newer = {op for op, since in pol.listed_since.items()
             if release(since) > release(RECORD["torch"])}
    assert newer == {"rms_norm"}
    bad = []
    assert len(RECORD["rows"]) == 172 and RECORD["device"].startswith("NVIDIA H100")
    for row in RECORD["rows"]:
        n, fn = cases[row["op"]]
        args = [rec.t((4, 4), d, pos=row["op"] == "log") for d in row["inputs"]]
        with at.autocast("cuda", DTYPES[row["dtype"]]):
            try:
                got = str(fn(*args).dtype).replace("torch.", "")
            except (RuntimeError, TypeError) as e:
                got = f"error: {e}"
        if row["op"] in newer:  # unlisted in 2.11: the input's dtype; fp32 from 2.12
            assert (row["output"], got) == (row["inputs"][0], "float32"), row
            continue
        same = got == row["output"] or (got.startswith("error") and
                                        row["output"].startswith("error"))
        if not same:
            bad.append((row["op"], row["dtype"], row["inputs"], row["output"], got))
    assert not bad, f"{len(bad)} rows differ, first {bad[:5]}"


@pytest.mark.clause("TRC-AUT-002")
def test_cross_entropy_under_the_cuda_lists_is_float32_because_its_inner_ops_are() -> None:
    """Input: F.cross_entropy of float16 logits under autocast("cuda", float16); the CUDA
    lists do not name cross_entropy_loss but name log_softmax (fp32_set_opt_dtype) and
    nll_loss (fp32). Expected: a float32 loss, as CUDA autocast gives (the bridge used to
    return float16 here). Pass: dtype float32 and the loss of the float32 logits."""
    logits = torch.randn(8, 5).half()
    y = torch.randint(0, 5, (8,))
    with at.autocast("cuda", torch.float16):
        loss = torch.nn.functional.cross_entropy(logits, y)
    assert loss.dtype == torch.float32
    # cross_entropy_loss asks log_softmax for float16 explicitly (its dtype argument is set,
    # so fp32_set_opt_dtype leaves it), then nll_loss casts the float16 log-probabilities
    want = torch.nn.functional.nll_loss(torch.log_softmax(logits, 1).float(), y)
    assert loss.item() == want.item()


def _script(steps: int) -> list[dict[str, float]]:
    """The recorded script (record_parts.py, part_dumps) as a user wrote it for a GPU,
    unmodified but for running on CPU tensors: autocast("cuda"), GradScaler("cuda"),
    the loss multiplied by 1e6 at steps 3, 11, 12 and 30 (planted overflows)."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(),
                                torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    trace = []
    with at.emulate(model):
        scaler = torch.amp.GradScaler("cuda", init_scale=2.0**16, growth_interval=5)
        x, y = torch.randn(64, 16), torch.randn(64, 4)
        for step in range(steps):
            opt.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                out = model(x)
                loss = torch.nn.functional.mse_loss(out.float(), y)
            loss_value = loss.detach()
            assert out.dtype == torch.float16
            scaler.scale(loss * (1e6 if step in (3, 11, 12, 30) else 1.0)).backward()
            scaler.step(opt)
            scaler.update()
            trace.append({"step": step, "loss": loss_value.item(), "scale": scaler.get_scale()})
    return trace


@pytest.mark.clause("TRC-CUD-001", "TRC-CUD-002")
def test_a_cuda_amp_script_runs_under_emulate_with_its_own_autocast_and_scaler() -> None:
    """Input: the recorded H100 GradScaler script, its calls unchanged, 40 steps under
    emulate on a CPU-only machine. Expected: no 'CUDA is not available' warning, fp16
    outputs, and the H100's scale after every step (65536 -> 32768 at step 3 ... the
    backoffs at the planted steps and growth every 5 clean steps). Pass: the 40 scales
    equal the recorded ones and the loss is unchanged exactly on the skipped steps."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch's "Disabling" warnings would fail here
        ours = _script(40)
    theirs = RECORD["gradscaler"]
    assert [t["scale"] for t in ours] == [t["scale"] for t in theirs]
    skipped = [t["step"] for t, nxt in zip(ours, ours[1:], strict=False)
               if nxt["loss"] == t["loss"]]
    assert skipped == [3, 11, 12, 30]


@pytest.mark.clause("TRC-CUD-001")
def test_outside_emulate_torchs_cuda_calls_are_torchs_own_again() -> None:
    """Input: torch.autocast("cuda") made after an emulate region closed, on a machine
    without CUDA. Expected: torch's own behaviour (its warning, autocast disabled).
    Pass: the warning is raised and a linear stays float32."""
    if torch.cuda.is_available():
        pytest.skip("a machine with CUDA: torch's autocast is enabled there")
    with at.emulate():
        pass
    with pytest.warns(UserWarning, match="CUDA is not available"):
        ac = torch.autocast("cuda", dtype=torch.float16)
    with ac:
        out = torch.nn.functional.linear(torch.randn(2, 3), torch.randn(4, 3))
    assert out.dtype == torch.float32


@pytest.mark.clause("TRC-NN-004", "ACC-LIB-004")
def test_a_cuda_amp_model_runs_on_the_h100s_library_arithmetic() -> None:
    """Input: the zoo's minGPT and nn.TransformerEncoder LM, one fp16 CUDA-autocast
    training step each under emulate(accumulation='cublas:h100'), and the same under
    'exact'. Expected: every GEMM runs on the H100 library model with no op left to
    torch: fp16 operands on the tensor-core chain, and the float32 bmm of the encoder's
    CPU attention decomposition on the SIMT SGEMM model (an FMA chain); so gradients
    differ from the exact run's. Pass: finite, different, nothing not emulated."""
    import zoo

    def step(name: str, acc: str) -> tuple[Any, Any]:
        c = zoo.case(name)
        with at.emulate(c.model, accumulation=acc) as em:
            with torch.autocast("cuda", dtype=torch.float16):
                loss = c.loss(c.model(c.inputs))
            loss.backward()
        return torch.cat([p.grad.reshape(-1) for p in c.model.parameters()  # type: ignore[union-attr]
                          if p.grad is not None]), em

    for name in ("gpt", "transformer"):
        lib, em = step(name, "cublas:h100")
        exact, _ = step(name, "exact")
        assert torch.isfinite(lib).all() and int((lib != exact).sum()) > 0, name
        assert not em.report.not_emulated(), name


@pytest.mark.clause("TRC-NN-004", "ACC-LIB-004")
def test_emulate_follows_torchs_tf32_switch_under_a_library_model() -> None:
    """Input: a float32 nn.Linear(24, 5) on a 3x24 batch under
    emulate(accumulation='cublas:h100'), once with torch.backends.cuda.matmul.allow_tf32
    off (torch's default) and once on (restored after). Expected: off, the SGEMM model
    (ampref.matmul 'cublas:h100' on float32 operands, then the bias in float32); on, the
    TF32 kernels ('cublas:h100:tf32'); the two differ. Pass: bitwise equal to each."""
    from ampref.accumulation import models

    torch.manual_seed(0)
    lin, x = torch.nn.Linear(24, 5), torch.randn(3, 24)
    w = lin.weight.detach().numpy().astype(np.float64).T
    bias = lin.bias.detach().numpy().astype(np.float64)
    before = torch.backends.cuda.matmul.allow_tf32
    for flag, name in ((False, "cublas:h100"), (True, "cublas:h100:tf32")):
        torch.backends.cuda.matmul.allow_tf32 = flag
        try:
            with at.emulate(lin, accumulation="cublas:h100"):
                got = lin(x).detach().numpy()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = before
        acc = models.matmul(x.numpy().astype(np.float64), w, input_format="float32",
                            accumulation=name)
        want = (acc.astype(np.float64) + bias).astype(np.float32)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), name
