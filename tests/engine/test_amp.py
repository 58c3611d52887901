"""The torch-shaped front door: ampref.amp.GradScaler, autocast(device_type, ...),
nn.utils.clip_grad_norm_, zero_grad(set_to_none), and the two examples (SCL-GSC-*,
SCL-CLP-001, AUT-CTX-003)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref import nn, optim
from paths import ROOT

RECORDED = json.loads((ROOT / "tests" / "data" / "gradscaler_example_torch.json").read_text())


def _script(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _model_and_optimizer() -> tuple[nn.Module, optim.Optimizer]:
    model = nn.Sequential(nn.Linear(4, 8, seed=1), nn.ReLU(), nn.Linear(8, 3, seed=2))
    return model, optim.SGD(model.parameters(), lr=0.1)


def _backward(model: nn.Module, scaler: ampref.amp.GradScaler) -> None:
    x = ampref.tensor(np.random.default_rng(0).standard_normal((5, 4)))
    with ampref.autocast("cuda", ampref.float16):
        loss = F.cross_entropy(model(x), np.arange(5) % 3)
    scaler.scale(loss).backward()


# ------------------------------------------------------------------------- examples
def _run_example(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "examples" / name), *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.clause("SCL-GSC-002")
def test_fp16_example_skips_the_planted_steps_with_torchs_scale_trajectory(tmp_path: Path) -> None:
    """Inputs: examples/amp_fp16_gradscaler.py with its planted overflow steps. Expected:
    the skipped steps are the planted ones, scales and skips equal the trajectory recorded
    from torch's GradScaler, and the loss halves. Pass: all."""
    out = tmp_path / "traj.json"
    r = _run_example("amp_fp16_gradscaler.py", "--json", str(out))
    assert r.returncode == 0, r.stderr
    ours = json.loads(out.read_text())
    assert ours["skipped"] == ours["planted"] == RECORDED["planted"]
    assert ours["scales"] == RECORDED["scales"] and ours["skipped"] == RECORDED["skipped"]
    assert ours["losses"][-1] < 0.5 * ours["losses"][0]  # it trains


@pytest.mark.clause("SCL-GSC-002")
def test_fp16_example_trajectory_equals_live_torch_gradscaler(tmp_path: Path) -> None:
    """Inputs: the example with three plant sets (none, a run at the start, scattered).
    Expected: scales and skipped steps equal the installed torch's GradScaler on the same
    flags. Pass: equal for each set."""
    pytest.importorskip("torch")
    rec = _script(ROOT / "scripts" / "record_gradscaler_example.py")
    for planted in ([5, 6, 13], [0, 1, 2, 3, 9], []):
        out = tmp_path / "t.json"
        r = _run_example("amp_fp16_gradscaler.py", "--plant", ",".join(map(str, planted)),
                         "--json", str(out))
        assert r.returncode == 0, r.stderr
        ours = json.loads(out.read_text())
        live = rec.torch_trajectory(24, planted, 2.0**10, 4)
        assert ours["scales"] == live["scales"] and ours["skipped"] == live["skipped"], planted


@pytest.mark.clause("AUT-CTX-003")
def test_bf16_example_runs_and_trains() -> None:
    """Inputs: examples/amp_bf16.py. Expected: exit 0 and bf16 logits with a float32 loss
    printed. Pass: both."""
    r = _run_example("amp_bf16.py")
    assert r.returncode == 0, r.stderr
    assert "logits bfloat16, loss float32" in r.stdout


# ------------------------------------------------------------------------- GradScaler
@pytest.mark.clause("SCL-GSC-001")
def test_gradscaler_misuse_raises_torchs_errors() -> None:
    """Inputs: update before any inf check, double unscale_, double step, unscale_ after
    step, a closure, step without inf checks, device 'tpu', enabled='no'. Expected: torch's
    RuntimeError messages; ValueError and TypeError for the arguments. Pass: each."""
    model, opt = _model_and_optimizer()
    scaler = ampref.amp.GradScaler("cpu")
    with pytest.raises(RuntimeError, match="No inf checks were recorded prior to update."):
        scaler.update()
    _backward(model, scaler)
    scaler.unscale_(opt)
    with pytest.raises(RuntimeError,
                       match="unscale_\\(\\) has already been called on this optimizer"):
        scaler.unscale_(opt)
    assert scaler.step(opt) is True
    with pytest.raises(RuntimeError,
                       match="step\\(\\) has already been called since the last update"):
        scaler.step(opt)
    with pytest.raises(RuntimeError, match="unscale_\\(\\) is being called after step\\(\\)"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.update()
    opt.zero_grad()
    with pytest.raises(RuntimeError, match="No inf checks were recorded for this optimizer."):
        scaler.step(opt)
    with pytest.raises(ValueError, match="device must be one of cuda, cpu, got 'tpu'"):
        ampref.amp.GradScaler("tpu")
    with pytest.raises(TypeError, match="enabled must be a bool"):
        ampref.amp.GradScaler("cpu", enabled="no")  # type: ignore[arg-type]


@pytest.mark.clause("SCL-GSC-001")
def test_gradscaler_step_tells_whether_the_step_was_skipped() -> None:
    """Inputs: a step with a NaN gradient (return_found_inf=True), then a clean step.
    Expected: True (inf found), parameters unchanged, scale 8 -> 4; the clean step returns
    the optimizer's own True. Pass: all."""
    model, opt = _model_and_optimizer()
    scaler = ampref.amp.GradScaler("cpu", init_scale=8.0)
    _backward(model, scaler)
    model.parameters()[1].grad[0] = np.nan
    before = [p.numpy() for p in model.parameters()]
    assert scaler.step(opt, return_found_inf=True) is True
    after = [p.numpy() for p in model.parameters()]
    assert all(np.array_equal(a, b) for a, b in zip(before, after, strict=True))
    scaler.update()
    assert scaler.get_scale() == 4.0
    opt.zero_grad()
    _backward(model, scaler)
    assert scaler.step(opt) is True  # the optimizer's own return value: applied
    scaler.update()


@pytest.mark.clause("SCL-GSC-001", "SCL-STA-001")
def test_gradscaler_state_dict_is_torchs_and_disabled_scalers_pass_through() -> None:
    """Inputs: GradScaler(init 256, interval 3); a disabled scaler; an empty dict to load;
    update(new_scale=1024) and NaN. Expected: torch's five keys and getters; the disabled
    scaler returns the loss itself, scale 1, {}; RuntimeError for the empty dict; 1024
    logged as 'set'; ValueError for NaN. Pass: all."""
    scaler = ampref.amp.GradScaler("cpu", init_scale=256.0, growth_interval=3)
    assert scaler.state_dict() == {"scale": 256.0, "growth_factor": 2.0, "backoff_factor": 0.5,
                                   "growth_interval": 3, "_growth_tracker": 0}
    assert (scaler.get_growth_factor(), scaler.get_backoff_factor(),
            scaler.get_growth_interval()) == (2.0, 0.5, 3)
    off = ampref.amp.GradScaler("cpu", enabled=False)
    loss = ampref.tensor([2.0])
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    assert not off.is_enabled()
    with pytest.raises(RuntimeError, match="The source state dict is empty"):
        scaler.load_state_dict({})
    scaler.update(new_scale=1024.0)
    assert scaler.get_scale() == 1024.0 and scaler.loss_scaler.audit_log()[-1]["action"] == "set"
    with pytest.raises(ValueError, match="must be >= 0 and not NaN"):
        scaler.update(new_scale=float("nan"))


@pytest.mark.clause("SCL-GSC-001")
def test_gradscaler_state_dict_moves_to_and_from_torch() -> None:
    """Inputs: our state dict loaded into torch's CPU GradScaler and back. Expected: torch
    reads scale 512 and interval 7; the round trip returns the same dict. Pass: both."""
    torch = pytest.importorskip("torch")
    ours = ampref.amp.GradScaler("cpu", init_scale=512.0, growth_interval=7)
    real = torch.amp.GradScaler("cpu")
    real.load_state_dict(ours.state_dict())
    assert real.get_scale() == 512.0 and real.get_growth_interval() == 7
    back = ampref.amp.GradScaler("cpu")
    back.load_state_dict(real.state_dict())
    assert back.state_dict() == ours.state_dict()


@pytest.mark.clause("SCL-GSC-001")
def test_other_profiles_run_behind_the_same_front_door() -> None:
    """Inputs: GradScaler(profile='megatron') with two overflowing steps; an apex factor
    override. Expected: 2^32 and 1000 defaults, actions skip then backoff (hysteresis 2);
    ValueError for the fixed factor. Pass: all."""
    scaler = ampref.amp.GradScaler("cpu", profile="megatron")
    assert scaler.get_scale() == 2.0**32 and scaler.get_growth_interval() == 1000
    model, opt = _model_and_optimizer()
    for _ in range(2):  # megatron's hysteresis 2: the first overflow only skips
        _backward(model, scaler)
        model.parameters()[0].grad[0, 0] = np.inf
        scaler.step(opt)
        scaler.update()
        opt.zero_grad()
    assert [e["action"] for e in scaler.loss_scaler.audit_log()] == ["skip", "backoff"]
    with pytest.raises(ValueError, match="profile 'apex' fixes the factors"):
        ampref.amp.GradScaler("cpu", growth_factor=3.0, profile="apex")


# --------------------------------------------------------------- clip_grad_norm_
@pytest.mark.clause("SCL-CLP-001")
def test_clip_grad_norm_refuses_gradients_still_multiplied_by_the_scale() -> None:
    """Inputs: scaled gradients before and after unscale_. Expected: RuntimeError naming
    the scale 65536 before; clipping works after (marks cleared). Pass: both."""
    model, opt = _model_and_optimizer()
    scaler = ampref.amp.GradScaler("cpu")
    _backward(model, scaler)
    assert all(p.grad_scale == 65536.0 for p in model.parameters())
    with pytest.raises(RuntimeError, match="still multiplied by the loss scale 65536"):
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    scaler.unscale_(opt)
    assert all(p.grad_scale is None for p in model.parameters())
    nn.utils.clip_grad_norm_(model.parameters(), 1.0)


@pytest.mark.clause("SCL-CLP-001")
def test_clip_grad_norm_returns_the_float64_norm_and_clips_to_max_norm() -> None:
    """Inputs: two random gradients, max_norm 0.5; the inf norm with max 100. Expected: the
    total norm within 2^-48 of the exact rational norm; clipped norm within 1e-6 of 0.5;
    the inf norm the largest |g|. Pass: all."""
    rng = np.random.default_rng(3)
    ps = [ampref.tensor(rng.standard_normal(s), requires_grad=True) for s in ((3, 4), (5,))]
    for p in ps:
        p.grad = rng.standard_normal(p.shape).astype(np.float32)
    exact = sum(Fraction(float(v)) ** 2 for p in ps for v in p.grad.reshape(-1))
    total = nn.utils.clip_grad_norm_(ps, max_norm=0.5)
    assert abs(total**2 - float(exact)) <= 2.0**-48 * float(exact)
    clipped = np.sqrt(sum(float(np.sum(p.grad.astype(np.float64) ** 2)) for p in ps))
    assert abs(clipped - 0.5) < 1e-6  # rounding each element to float32 moves it by < 2^-24
    inf_norm = nn.utils.clip_grad_norm_(ps, max_norm=100.0, norm_type=float("inf"))
    assert inf_norm == max(float(np.max(np.abs(p.grad))) for p in ps)


@pytest.mark.clause("SCL-CLP-001")
def test_clip_grad_norm_reports_a_nonfinite_norm_and_rejects_bad_arguments() -> None:
    """Inputs: an inf gradient; error_if_nonfinite; an array parameter; a float; max_norm
    0. Expected: inf returned and the gradient untouched; RuntimeError; TypeErrors naming
    the parameter and the type; ValueError for 0. Pass: each."""
    p = ampref.tensor([1.0, 2.0], requires_grad=True)
    p.grad = np.array([np.inf, 1.0], np.float32)
    assert nn.utils.clip_grad_norm_(p, 1.0) == np.inf and p.grad[0] == np.inf
    with pytest.raises(RuntimeError, match="is non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_([p], 1.0, error_if_nonfinite=True)
    with pytest.raises(TypeError, match="parameter 0 is a ndarray, not an ampref.Tensor"):
        nn.utils.clip_grad_norm_([np.ones(2)], 1.0)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="takes a Tensor or an iterable of Tensors, got float"):
        nn.utils.clip_grad_norm_(1.0, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_norm must be a positive finite number, got 0"):
        nn.utils.clip_grad_norm_([p], 0)


# --------------------------------------------------------------- autocast, zero_grad
@pytest.mark.clause("AUT-CTX-003")
def test_autocast_takes_torchs_device_type_and_one_name_means_one_thing() -> None:
    """Inputs: linear and softmax under autocast('cuda', float16) and autocast('cpu');
    device 'xla'; enabled=1; ampref.amp.autocast. Expected: fp16 linear and fp32 softmax
    (CUDA lists); bf16 for both on CPU; ValueError and TypeError; one autocast object, no
    ampref.autocast module. Pass: all."""
    x = ampref.tensor(np.ones((2, 3)))
    w = ampref.tensor(np.ones((4, 3)), requires_grad=True)
    with ampref.autocast(device_type="cuda", dtype=ampref.float16):
        assert F.linear(x, w).format.name == "float16"
        assert F.softmax(F.linear(x, w), -1).format.name == "float32"  # torch-cuda: fp32 out
    with ampref.autocast("cpu"):
        assert F.linear(x, w).format.name == "bfloat16"  # torch-cpu's default dtype
        assert F.softmax(F.linear(x, w), -1).format.name == "bfloat16"  # unlisted on CPU
    with pytest.raises(ValueError,
                       match="unknown autocast device_type 'xla'; choose one of cuda, cpu"):
        with ampref.autocast("xla"):
            pass
    with pytest.raises(TypeError, match="enabled must be a bool"):
        with ampref.autocast("cuda", enabled=1):  # type: ignore[arg-type]
            pass
    assert ampref.amp.autocast is ampref.autocast
    with pytest.raises(ModuleNotFoundError):
        __import__("ampref.autocast")


@pytest.mark.clause("ENG-OPT-005")
def test_zero_grad_sets_none_by_default_or_zeros() -> None:
    """Inputs: gradients after a backward; zero_grad(set_to_none=False), then
    model.zero_grad(). Expected: zero arrays, then None. Pass: both."""
    model, opt = _model_and_optimizer()
    _backward(model, ampref.amp.GradScaler("cpu", enabled=False))
    opt.zero_grad(set_to_none=False)
    assert all(p.grad is not None and not p.grad.any() for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
