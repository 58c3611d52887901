"""Modules, optimizers and loss-scaler integration; small models train reproducibly
(specs/engine.md ENG-NN-*, ENG-OPT-*)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref.engine import functional as F
from ampref import nn, optim
from ampref.engine.rng import Generator
from ampref.kernels import compiled_available


def _mlp_step(model: nn.Module, opt: optim.Optimizer, x: np.ndarray, y: np.ndarray,
              amp: bool, scaler: ampref.LossScaler | None) -> float:
    opt.zero_grad()
    with ampref.autocast("cuda", "float16", enabled=amp):
        loss = F.cross_entropy(model(ampref.tensor(x)), y)
    (scaler.scale_loss(loss) if scaler else loss).backward()
    opt.step(scaler=scaler)
    return loss.item()


def _train_mlp(amp: bool, steps: int = 8) -> tuple[list[float], dict[str, np.ndarray]]:
    g = Generator(5)
    x = g.normal((32, 10))
    y = g.integers(3, (32,))
    model = nn.MLP([10, 32, 3], seed=1)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = ampref.LossScaler.from_profile("torch", init_scale=2.0**12) if amp else None
    losses = [_mlp_step(model, opt, x, y, amp, scaler) for _ in range(steps)]
    return losses, model.state_dict()


def _train_transformer(amp: bool, steps: int = 4) -> tuple[list[float], dict[str, np.ndarray]]:
    g = Generator(9)
    ids = g.integers(11, (4, 9))
    emb = nn.Embedding(11, 16, std=0.1, seed=2)
    block = nn.TransformerBlock(16, 2, seed=3)
    head = nn.Linear(16, 11, seed=4)
    params = emb.parameters() + block.parameters() + head.parameters()
    opt = optim.AdamW(params, lr=3e-3)
    scaler = ampref.LossScaler.from_profile("torch", init_scale=2.0**10) if amp else None
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        with ampref.autocast("cuda", "float16", enabled=amp):
            logits = head(block(emb(ids[:, :-1])))
            loss = F.cross_entropy(logits, ids[:, 1:])
        (scaler.scale_loss(loss) if scaler else loss).backward()
        opt.step(scaler=scaler)
        losses.append(loss.item())
    sd = {**{f"e.{k}": v for k, v in emb.state_dict().items()},
          **{f"b.{k}": v for k, v in block.state_dict().items()},
          **{f"h.{k}": v for k, v in head.state_dict().items()}}
    return losses, sd


def _same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k].view(np.uint32), b[k].view(np.uint32))
                                        for k in a)


@pytest.mark.clause("ENG-OPT-001", "ENG-BWD-003")
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "fp16-autocast"])
def test_mlp_trains_and_is_bitwise_identical_run_to_run(amp: bool) -> None:
    """Inputs: the seeded MLP training loop twice, fp32 and fp16 autocast. Expected:
    identical losses and weights; the last loss below 0.8 of the first. Pass: both."""
    l1, w1 = _train_mlp(amp)
    l2, w2 = _train_mlp(amp)
    assert l1 == l2 and _same(w1, w2)
    assert l1[-1] < 0.8 * l1[0]


@pytest.mark.clause("ENG-OPT-001", "ENG-BWD-003", "ENG-NN-001")
@pytest.mark.parametrize("amp", [False, True], ids=["fp32", "fp16-autocast"])
def test_one_block_transformer_trains_and_is_bitwise_identical_run_to_run(amp: bool) -> None:
    """Inputs: the seeded one-block transformer loop twice, fp32 and fp16 autocast.
    Expected: identical losses and weights, and a falling loss. Pass: both."""
    l1, w1 = _train_transformer(amp)
    l2, w2 = _train_transformer(amp)
    assert l1 == l2 and _same(w1, w2)
    assert l1[-1] < l1[0]


@pytest.mark.clause("ENG-OPT-001")
def test_fp16_autocast_mlp_tracks_fp32_loss() -> None:
    """Inputs: the MLP loop in fp32 and under fp16 autocast. Expected: final losses within
    2 % of the initial loss. Pass: within (a bound: different roundings)."""
    l32, _ = _train_mlp(False)
    l16, _ = _train_mlp(True)
    assert abs(l16[-1] - l32[-1]) < 0.02 * l32[0]


@pytest.mark.clause("ENG-OPT-004")
@pytest.mark.parametrize("cls", [optim.SGD, optim.Adam, optim.AdamW])
def test_skipped_step_changes_nothing(cls: type) -> None:
    """Inputs: SGD (momentum), Adam, AdamW after one applied step; then a step with an inf
    gradient under the torch scaler. Expected: step returns False, weights, optimizer state
    and step count unchanged, the scale backed off to 2^15. Pass: all."""
    model = nn.MLP([4, 5, 2], seed=0)
    kw = {"lr": 0.1, "momentum": 0.9} if cls is optim.SGD else {"lr": 0.01}
    opt = cls(model.parameters(), **kw)
    scaler = ampref.LossScaler.from_profile("torch")
    x = ampref.tensor(np.ones((3, 4)))
    F.sum(model(x)).backward()
    assert opt.step(scaler=scaler)  # one applied step so state exists
    before_w, before_s = model.state_dict(), opt.state_dict()
    opt.zero_grad()
    F.sum(model(x)).backward()
    model.parameters()[0].grad[0, 0] = np.inf
    assert not opt.step(scaler=scaler)
    assert _same(model.state_dict(), before_w)
    after = opt.state_dict()
    assert after["steps"] == before_s["steps"]
    for s0, s1 in zip(before_s["state"], after["state"], strict=True):
        assert s0.keys() == s1.keys() and all(np.array_equal(s0[k], s1[k]) for k in s0)
    assert scaler.scale == 2.0**15 and scaler.audit_log()[-1]["action"] == "backoff"


@pytest.mark.clause("ENG-OPT-001", "ENG-OPT-006")
@pytest.mark.parametrize("kernels", ["numpy", "compiled"])
@pytest.mark.parametrize("cls, kw", [
    (optim.SGD, {"lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 0.01}),
    (optim.SGD, {"lr": 0.1, "momentum": 0.9, "dampening": 0.5}),
    (optim.Adam, {"lr": 0.01, "weight_decay": 0.01}),
    (optim.AdamW, {"lr": 0.01})])
def test_a_step_writes_new_weights_and_leaves_gradients_and_old_weights_alone(
        cls: type, kw: dict[str, float], kernels: str) -> None:
    """Inputs: an MLP (float32 parameters, so the optimizer works on the parameters'
    own arrays and gradients: no copies are made for the update) stepped twice by each
    optimizer under each kernel switch. Expected: after each step every gradient array
    holds the words it held before, the parameters' previous arrays too (the step binds
    new arrays), and the second step's momentum/moment buffers do not alias a gradient.
    Pass: equal uint32 words (hex of the first difference)."""
    model = nn.MLP([4, 5, 2], seed=0)
    opt = cls(model.parameters(), **kw)
    x = ampref.tensor(np.linspace(-1, 1, 12).reshape(3, 4))
    with ampref.use_kernels(kernels):
        for _ in range(2):
            opt.zero_grad()
            F.sum(model(x)).backward()
            grads = [(p.grad, p.grad.copy()) for p in model.parameters()]
            olds = [(p.data, p.data.copy()) for p in model.parameters()]
            opt.step()
            for i, (arr, words) in enumerate(grads + olds):
                bad = np.flatnonzero(arr.view(np.uint32).ravel() != words.view(np.uint32).ravel())
                what = f"gradient {i}" if i < len(grads) else f"old weights {i - len(grads)}"
                assert not bad.size, (f"{cls.__name__}: {what} written by the step: word "
                                      f"{bad[0]} {arr.view(np.uint32).ravel()[bad[0]]:08x}, "
                                      f"was {words.view(np.uint32).ravel()[bad[0]]:08x}")
            for p, (old, _) in zip(model.parameters(), olds, strict=True):
                assert p.data is not old, f"{cls.__name__}: the step kept the old array"
            for st in opt.state:
                for v in st.values():
                    assert not any(np.shares_memory(v, g) for g, _ in grads
                                   if isinstance(v, np.ndarray) and v.ndim), cls.__name__


@pytest.mark.clause("ENG-OPT-002")
def test_o2_low_precision_weights_keep_float32_masters() -> None:
    """Inputs: a Linear cast to fp16, three SGD steps at lr 1e-4 with unit gradients.
    Expected: float32 masters equal ((w - lr) - lr) - lr in float32; the fp16 weights are
    NumPy's cast of the masters. Pass: bitwise equal."""
    model = nn.Linear(3, 2, seed=0)
    model.to_format("float16")
    w32 = model.weight.numpy().copy()
    opt = optim.SGD(model.parameters(), lr=1e-4)
    for _ in range(3):
        opt.zero_grad()
        F.sum(model(ampref.tensor(np.ones((1, 3)), "float16")), dtype="float32").backward()
        opt.step()
    master = opt.master[0]
    assert master.dtype == np.float32
    from ampref.testing import assert_bitwise_equal

    lr = np.float32(1e-4)  # d(sum)/dw = 1 for every weight: three float32 subtractions of lr
    assert_bitwise_equal(master, ((w32 - lr) - lr) - lr)
    assert_bitwise_equal(model.weight.numpy(),
                         master.astype(np.float16).astype(np.float32))  # NumPy's cast


@pytest.mark.clause("ENG-OPT-003")
def test_pure_fp16_without_masters_loses_updates_below_half_an_ulp() -> None:
    """Inputs: fp16 parameters at 1, ten SGD steps of 1e-4 with and without masters.
    Expected: unchanged without (each update rounds away), below 1 with. Pass: both."""
    def run(master: bool) -> np.ndarray:
        p = nn.Parameter(np.full(4, 1.0), "float16")
        opt = optim.SGD([p], lr=1e-4, master_weights=master)
        for _ in range(10):
            opt.zero_grad()
            F.sum(p, dtype="float32").backward()
            opt.step()
        return p.numpy()

    assert np.all(run(False) == 1.0)  # 1 - 1e-4 rounds back to 1 in fp16 every time
    assert np.all(run(True) < 1.0)  # the float32 master accumulates 10 updates


@pytest.mark.clause("ENG-OPT-001")
@pytest.mark.parametrize("kernels", ["numpy"] + (["compiled"] if compiled_available() else []))
@pytest.mark.parametrize("name,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.5)),
    ("Adam", dict(lr=0.01, weight_decay=0.01)),
    ("AdamW", dict(lr=0.01, weight_decay=0.1))],
    ids=["SGD", "SGD-nesterov", "SGD-dampening", "Adam", "AdamW"])
def test_optimizers_track_torch_optimizers_in_float32(name: str, kw: dict[str, Any],
                                                      kernels: str) -> None:
    """Inputs: five random gradient steps of SGD (momentum, decay; with Nesterov; with
    dampening), Adam, AdamW from the same weights in ampref and torch, on the NumPy
    specification path and on the compiled kernels (each checked against torch, not only
    against each other). Expected: weights within rtol 2e-6, atol 2e-7 (torch's CPU
    kernels are not exactly rounded). Pass: allclose."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((5, 4)).astype(np.float32)
    grads = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(5)]
    p = nn.Parameter(w0)
    tp = torch.nn.Parameter(torch.tensor(w0))
    ours = getattr(optim, name)([p], **kw)
    theirs = getattr(torch.optim, name)([tp], **kw)
    for g in grads:
        p.grad = g.copy()
        tp.grad = torch.tensor(g)
        with ampref.use_kernels(kernels):
            ours.step()
        theirs.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=2e-6, atol=2e-7)


@pytest.mark.clause("ENG-NN-001")
def test_module_state_dict_round_trip_and_mismatch_errors() -> None:
    """Inputs: two MLPs; a state dict copied, one missing keys, one with a wrong shape.
    Expected: torch's key names, an identical copy, ValueErrors naming 'missing' and
    'shape'. Pass: all."""
    a, b = nn.MLP([3, 4, 2], seed=0), nn.MLP([3, 4, 2], seed=1)
    assert list(a.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    b.load_state_dict(a.state_dict())
    assert _same(a.state_dict(), b.state_dict())
    with pytest.raises(ValueError, match="missing"):
        b.load_state_dict({"0.weight": np.zeros((4, 3))})
    sd = a.state_dict()
    sd["0.bias"] = np.zeros(5)
    with pytest.raises(ValueError, match="shape"):
        b.load_state_dict(sd)


@pytest.mark.clause("ENG-NN-001")
def test_load_state_dict_without_strict_skips_and_returns_the_keys_torch_returns() -> None:
    """Inputs: an MLP 3-4-2 and torch's Sequential of the same layers (same names); one
    state dict missing '0.bias' with two extra names 'zz' and 'aa' (in that order),
    loaded with strict=False; then with strict=True. Expected: strict=False loads the
    three shared entries and returns torch's (missing_keys, unexpected_keys) lists,
    ['0.bias'] and ['zz', 'aa']; strict=True raises ValueError naming both sides.
    Pass: equal lists, loaded values bitwise equal, the error."""
    torch = pytest.importorskip("torch")
    ours, src = nn.MLP([3, 4, 2], seed=0), nn.MLP([3, 4, 2], seed=1)
    theirs = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    sd = {k: v for k, v in src.state_dict().items() if k != "0.bias"}
    sd.update(zz=np.ones(1), aa=np.ones(1))
    got = ours.load_state_dict(sd, strict=False)
    want = theirs.load_state_dict({k: torch.tensor(v) for k, v in sd.items()}, strict=False)
    assert (got.missing_keys, got.unexpected_keys) == (want.missing_keys, want.unexpected_keys)
    assert got == (["0.bias"], ["zz", "aa"])
    after = ours.state_dict()
    assert all(_same({k: after[k]}, {k: sd[k]}) for k in ("0.weight", "2.weight", "2.bias"))
    with pytest.raises(ValueError, match=r"missing \['0.bias'\], unexpected \['zz', 'aa'\]"):
        ours.load_state_dict(sd)


@pytest.mark.clause("ENG-NN-001", "API-ERR-001")
def test_load_state_dict_loads_nothing_when_one_entry_is_refused() -> None:
    """Inputs: an MLP 3-4-2 given another MLP's state dict whose last entry ('2.bias')
    has shape (5,), with strict=True and strict=False; a list instead of a dict; strict
    given as "no". Expected: ValueError naming '2.bias' and both shapes, and every
    parameter still holding its old bits (no half-loaded model); TypeErrors naming the
    mapping and the flag. Pass: the errors and bitwise equal parameters."""
    a, b = nn.MLP([3, 4, 2], seed=0), nn.MLP([3, 4, 2], seed=1)
    before = a.state_dict()
    sd = b.state_dict()
    sd["2.bias"] = np.zeros(5, np.float32)
    for strict in (True, False):
        with pytest.raises(ValueError, match=r"'2.bias' has shape \(5,\), the module's "
                                             r"tensor has \(2,\)"):
            a.load_state_dict(sd, strict=strict)
        assert _same(a.state_dict(), before)
    with pytest.raises(TypeError, match="state dict .* got list"):
        a.load_state_dict(list(sd.items()))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="strict must be a bool"):
        a.load_state_dict(b.state_dict(), strict="no")  # type: ignore[arg-type]


@pytest.mark.clause("ENG-NN-001")
@pytest.mark.parametrize(("source", "target"), [("SGD", "Adam"), ("Adam", "SGD"),
                                                ("SGD", "AdamW")])
def test_an_optimizer_refuses_the_buffers_of_another_optimizer(source: str,
                                                                target: str) -> None:
    """Inputs: a Linear(3, 2) stepped once by ``source`` (SGD with momentum 0.9, or
    Adam), its state dict loaded into a fresh ``target``. Expected: ValueError naming
    the foreign buffers and the ones ``target`` keeps (before: Adam ran on with SGD's
    momentum buffer and step count). Adam's state loads into AdamW (the same buffers).
    Pass: the error, and the AdamW load."""
    m = nn.Linear(3, 2, seed=0)
    x = ampref.tensor(np.ones((2, 3), np.float32))
    kw: dict[str, Any] = {"momentum": 0.9} if source == "SGD" else {}
    first = getattr(optim, source)(m.parameters(), lr=0.1, **kw)
    m(x).sum().backward()
    first.step()
    with pytest.raises(ValueError, match=f"optimizer state holds .*; {target} keeps"):
        getattr(optim, target)(m.parameters(), lr=0.1).load_state_dict(first.state_dict())
    if source == "Adam":
        optim.AdamW(m.parameters(), lr=0.1).load_state_dict(first.state_dict())


def _grad_uses(ctx: Any, x: Any, nest: bool) -> list[bool]:
    """``(x * 2).requires_grad`` in each use of one grad-mode object ``ctx``: two blocks
    (with ``nest``, each holding a block of ``ctx`` itself), after each exit, and in a
    function it decorates, called twice."""
    seen = []
    for _ in range(2):
        with ctx:
            if nest:
                with ctx:
                    seen.append((x * 2).requires_grad)
            seen.append((x * 2).requires_grad)
        seen.append((x * 2).requires_grad)
    run = ctx(lambda: (x * 2).requires_grad)
    return seen + [run(), (x * 2).requires_grad, run()]


@pytest.mark.clause("ENG-BWD-003")
def test_one_no_grad_object_serves_every_block_and_decoration_as_torchs_does() -> None:
    """Inputs: ``ampref.no_grad()`` made once; ``x * 2`` of a requires-grad tensor in two
    blocks of it, after each exit, and in a function it decorates, called twice; then
    the same with each block holding a block of the object itself. Expected: what one
    ``torch.no_grad()`` gives in the unnested uses (the oracle where torch is
    installed): ``requires_grad`` False inside, True after every exit (before, the second
    ``with`` raised AttributeError inside contextlib); nested, also True after every
    outer exit (torch 2.13's object leaves grad mode off there, so it is not run nested).
    Pass: equal lists."""
    x = ampref.tensor([1.0], requires_grad=True)
    ours = _grad_uses(ampref.no_grad(), x, nest=False)
    assert ours == [False, True] * 2 + [False, True, False]
    assert _grad_uses(ampref.no_grad(), x, nest=True) == [False, False, True] * 2 + [
        False, True, False]
    torch = pytest.importorskip("torch")
    assert ours == _grad_uses(torch.no_grad(), torch.ones(1, requires_grad=True), nest=False)


@pytest.mark.clause("ENG-RNG-001", "ENG-RNG-002")
def test_initialisation_and_sampling_draw_from_the_seeded_generator_in_call_order() -> None:
    """Input: manual_seed(11), then a Linear(4, 3) without seed, then ampref.rand(5) and
    randn(4). Expected: the Linear's weight and bias are the first 12 and next 3
    uniforms of Generator(11) scaled to +-1/sqrt(4) (initialisation uses the generator),
    rand(5) the next 5 uniforms and randn(4) the following normals (sampling uses it,
    in call order); the global state afterwards is (11, 12 + 3 + 5 + 4). Pass: bitwise
    equality and the counter."""
    ampref.manual_seed(11)
    lin = nn.Linear(4, 3)
    r, z = ampref.rand(5), ampref.randn(4)
    twin = Generator(11)
    w, b = twin.uniform((3, 4), -0.5, 0.5), twin.uniform((3,), -0.5, 0.5)
    assert np.asarray(lin.weight.data).tobytes() == w.tobytes()
    assert lin.bias is not None and np.asarray(lin.bias.data).tobytes() == b.tobytes()
    assert np.asarray(r.data).tobytes() == twin.uniform((5,)).tobytes()
    assert np.asarray(z.data).tobytes() == twin.normal((4,)).tobytes()
    assert ampref.engine.creation.default_generator().state_dict() == twin.state_dict()


@pytest.mark.clause("ENG-RNG-001")
def test_generator_state_is_seed_and_counter() -> None:
    """Input: Generator(3) draws 5 uniforms, its state is saved, 7 normals drawn; a
    Generator(0) loads the state. Expected: it draws the same 7 normals (the state is
    (seed, counter) and nothing else); uniforms lie in [0, 1); integers(10) covers 0..9.
    Pass: bitwise equality and the ranges."""
    g = Generator(3)
    a = g.uniform((5,))
    sd = g.state_dict()
    b = g.normal((7,))
    h = Generator(0)
    h.load_state_dict(sd)
    assert np.array_equal(h.normal((7,)), b)
    assert np.all((a >= 0) & (a < 1))
    ints = Generator(1).integers(10, (10_000,))
    assert ints.min() == 0 and ints.max() == 9


def test_optimizer_rejects_bad_arguments_with_clear_errors() -> None:
    p = nn.Parameter(np.ones(2))
    with pytest.raises(ValueError, match="learning rate"):
        optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="betas"):
        optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(TypeError, match="parameter 0 is not a leaf"):
        optim.SGD([p * 2], lr=0.1)


@pytest.mark.clause("ENG-NN-001", "ENG-CNV-001")
def test_small_conv_net_trains_under_fp16_autocast() -> None:
    """Inputs: a conv + linear net, six Adam steps under fp16 autocast with the torch
    scaler. Expected: fp16 activations and a falling loss. Pass: both."""
    g = Generator(2)
    x = ampref.tensor(g.normal((8, 1, 6, 6)))
    y = g.integers(2, (8,))
    conv, head = nn.Conv2d(1, 4, 3, padding=1, seed=1), nn.Linear(4 * 36, 2, seed=2)
    opt = optim.Adam(conv.parameters() + head.parameters(), lr=0.02)
    scaler = ampref.LossScaler.from_profile("torch")
    losses = []
    for _ in range(6):
        opt.zero_grad()
        with ampref.autocast("cuda", "float16"):
            h = F.relu(conv(x))
            assert h.format.name == "float16"
            loss = F.cross_entropy(head(h.reshape(8, -1)), y)
        scaler.scale_loss(loss).backward()
        opt.step(scaler=scaler)
        losses.append(loss.item())
    assert losses[-1] < losses[0]
