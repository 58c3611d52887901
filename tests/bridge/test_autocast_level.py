"""ampref's autocast is applied where torch's is: per aten op, composites' inner ops
included (TRC-AUT-001, TRC-AUT-004, TRC-EMU-001, TRC-EMU-005). The oracle is torch itself:
the same model and batch run once under ``torch.autocast("cpu", dtype)`` and once under
``ampref.torch.emulate`` + ``ampref.torch.autocast("cpu", dtype)`` (no fallback), and the
two runs must issue the same aten ops in the same order with the same output dtypes and
input shapes, forward and backward, and give every module's output and every gradient
the same dtype."""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from typing import Any

import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

import zoo  # noqa: E402

#: the models and dtypes compared. torch's CPU LSTM goes to oneDNN, which refuses float16
#: everywhere and bfloat16 on CPUs without AVX-512 ("could not create a primitive
#: descriptor for the LSTM forward propagation primitive"): the LSTM also runs on torch's
#: native kernels (oneDNN switched off in both runs, "lstm-native") in both dtypes, and
#: on oneDNN in bfloat16 where the CPU takes it
RUNS = [(n, d) for n in zoo.NAMES for d in ("bfloat16", "float16")
        if not (n == "lstm" and d == "float16")] + [
    ("lstm-native", "bfloat16"), ("lstm-native", "float16")]


@functools.cache
def onednn_lstm_refusal(dtype: str) -> str | None:
    """oneDNN's refusal of a one-step float32 LSTM under ``dtype`` CPU autocast on this
    CPU (a model already in ``dtype`` may still run), or None if it runs."""
    dt = getattr(torch, dtype)
    try:
        with torch.autocast("cpu", dt):
            torch.nn.LSTM(2, 2)(torch.zeros(1, 1, 2))
    except RuntimeError as e:
        if "primitive descriptor" in str(e):
            return str(e).split(".")[0]
        raise
    return None


@contextmanager
def onednn(enabled: bool) -> Iterator[None]:
    """torch's oneDNN kernels switched on or off (its flags() warns about Intel GPUs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        with torch.backends.mkldnn.flags(enabled=enabled):
            yield


class OpLog(TorchDispatchMode):  # type: ignore[misc]
    """Every aten op that reaches the dispatcher below autograd: name, output dtypes and
    floating input shapes (shapes show which tensor a cast was applied to; byte tensors
    are kernels' opaque workspaces, such as oneDNN's LSTM state, and are left out)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[tuple[str, tuple[str, ...], tuple[Any, ...]]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        outs = out if isinstance(out, (list, tuple)) else [out]
        self.ops.append((func.overloadpacket.__name__,
                         tuple(str(o.dtype) for o in outs if isinstance(o, torch.Tensor)),
                         tuple(tuple(a.shape) for a in args
                               if isinstance(a, torch.Tensor) and a.dtype.is_floating_point)))
        return out


def trace(name: str, dtype: str, ours: bool) -> dict[str, Any]:
    """One training step of zoo model ``name`` (forward, loss, backward) under torch's
    autocast or under emulate + ampref's autocast: the op log, module outputs, grads."""
    c = zoo.case(name)
    mods: list[tuple[str, str]] = []
    for path, m in c.model.named_modules():
        m.register_forward_hook(lambda _m, _i, o, p=path: mods.append(
            (p, str((o[0] if isinstance(o, tuple) else o).dtype))))
    torch.manual_seed(1)  # the dropout masks: torch's generator draws them in both runs
    dt = getattr(torch, dtype)
    with ExitStack() as stack:
        if ours:
            stack.enter_context(at.emulate(c.model, fallback="error"))
        log = stack.enter_context(OpLog())
        with at.autocast("cpu", dt) if ours else torch.autocast("cpu", dt):
            loss = c.loss(c.model(c.inputs))
        loss.backward()
    grads = [(n, str(p.grad.dtype)) for n, p in c.model.named_parameters() if p.grad is not None]
    return {"ops": log.ops, "modules": mods, "grads": grads}


def _first_difference(a: list[Any], b: list[Any]) -> str:
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return f"op {i}: torch {x}, ampref {y}; before: {a[max(0, i - 3):i]}"
    return f"lengths differ: torch {len(a)}, ampref {len(b)}"


@pytest.mark.clause("TRC-AUT-001", "TRC-AUT-004", "TRC-EMU-001", "TRC-EMU-005")
@pytest.mark.parametrize(("name", "dtype"), RUNS, ids=[f"{n}-{d}" for n, d in RUNS])
def test_every_op_and_module_dtype_equals_torchs_cpu_autocast(name: str, dtype: str) -> None:
    """Input: one training step of an MLP, a CNN with batch norm, an nn.TransformerEncoder
    LM with a causal mask, a minGPT with masked_fill(-inf), an LSTM and a GRU LM, under
    bf16 and fp16 (the LSTM also on torch's native kernels, oneDNN off in both runs).
    Expected: ampref (emulate, no fallback) issues torch's aten ops in
    torch's order with torch's output dtypes and input shapes, and module outputs and
    gradients have torch's dtypes. Pass: the three lists are equal."""
    native = name.endswith("-native")
    if name == "lstm" and (refusal := onednn_lstm_refusal(dtype)):
        pytest.skip(f"oneDNN refuses a {dtype} LSTM on this CPU ({refusal}); "
                    f"lstm-native-{dtype} compares torch's native kernels")
    model = name.removesuffix("-native")
    with onednn(False) if native else nullcontext():
        theirs, ours = trace(model, dtype, False), trace(model, dtype, True)
    assert ours["ops"] == theirs["ops"], _first_difference(theirs["ops"], ours["ops"])
    assert ours["modules"] == theirs["modules"]
    assert ours["grads"] == theirs["grads"]
    assert any(op == "_to_copy" for op, _, _ in ours["ops"])  # the policy did cast


@pytest.mark.clause("TRC-AUT-001")
def test_the_check_sees_a_composite_cast_only_at_the_top() -> None:
    """Input: nn.MultiheadAttention under bf16, autocast applied to the Python-level call
    only (the bridge's former TorchFunctionMode, ampref.torch.jmpmode with the torch-cpu
    lists). Expected: its output dtype differs from torch's (float32 vs bfloat16), which
    the dispatcher-level autocast gets right. Pass: both hold."""
    from ampref.policy import autocast as policy_autocast
    from ampref.torch.jmpmode import JmpMode

    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    q = torch.randn(2, 5, 8)
    with torch.autocast("cpu", torch.bfloat16):
        want = mha(q, q, q)[0].dtype
    with policy_autocast.autocast("cpu", "bfloat16"), JmpMode():
        top_level_only = mha(q, q, q)[0].dtype
    with at.autocast("cpu", torch.bfloat16):
        got = mha(q, q, q)[0].dtype
    assert (want, got) == (torch.bfloat16, torch.bfloat16) and top_level_only == torch.float32


@pytest.mark.clause("TRC-AUT-004")
def test_casts_run_right_to_left_as_torchs_compiled_kernels_evaluate_them() -> None:
    """Input: Linear(4, 3) on a (2, 4) input under bf16. Expected: the three casts in
    torch's order, bias (3,), weight (3, 4), input (2, 4) (its C++ argument expansion runs
    right to left), in both runs. Pass: the _to_copy input shapes are equal and in that
    order."""
    lin, x = torch.nn.Linear(4, 3), torch.randn(2, 4)

    def casts(ours: bool) -> list[Any]:
        with OpLog() as log, (at.autocast("cpu", torch.bfloat16) if ours
                              else torch.autocast("cpu", torch.bfloat16)):
            lin(x)
        return [shapes for op, _, shapes in log.ops if op == "_to_copy"]

    assert casts(False) == casts(True) == [((3,),), ((3, 4),), ((2, 4),)]


@pytest.mark.clause("TRC-AUT-002", "AUT-CAT-003")
@pytest.mark.parametrize("form", ["positional None", "keyword None", "absent"])
def test_set_opt_dtype_ops_get_float32_however_their_dtype_is_left_unset(form: str) -> None:
    """Inputs: softmax, log_softmax and sum over dim 1 of a float16 (3, 5) tensor under
    the emulated CUDA autocast (fp32_set_opt_dtype ops), with dtype passed positionally
    as None (softmax and log_softmax: sum's dtype is keyword-only), as dtype=None, or not
    at all, through the aten overloads; and dtype=float64 given. Expected: what
    torch's set_opt_dtype does: the op with dtype=float32, i.e. equal, bit for bit, to the
    same aten call with dtype float32 outside autocast; a given float64 kept. Pass: dtypes
    and bit patterns."""
    x = torch.randn(3, 5).half()
    aten = torch.ops.aten
    calls = {"softmax": (aten.softmax.int, (x, 1)), "log_softmax": (aten.log_softmax.int,
                                                                     (x, 1)),
             "sum": (aten.sum.dim_IntList, (x, [1], False))}
    for name, (op, args) in calls.items():
        if form == "positional None" and name == "sum":
            continue
        with at.autocast("cuda", torch.float16):
            if form == "positional None":
                got = op(*args, None)
            elif form == "keyword None":
                got = op(*args, dtype=None)
            else:
                got = op(*args)
        want = op(*args, dtype=torch.float32)
        assert got.dtype == want.dtype == torch.float32, (name, got.dtype)
        assert torch.equal(got.view(torch.int32), want.view(torch.int32)), name
        with at.autocast("cuda", torch.float16):  # a dtype the caller gives is kept
            kept = op(*args, dtype=torch.float64)
        assert kept.dtype == torch.float64 and torch.equal(kept, op(*args, dtype=torch.float64))


def _logged_call(call: Any, ours: bool, dtype: Any) -> list[Any]:
    with ExitStack() as stack:
        if ours:
            stack.enter_context(at.emulate(fallback="error"))
        log = stack.enter_context(OpLog())
        with at.autocast("cpu", dtype) if ours else torch.autocast("cpu", dtype):
            y = call()
        y.float().sum().backward()
    return log.ops


@pytest.mark.clause("TRC-AUT-001", "TRC-AUT-004")
@pytest.mark.parametrize("which", ["leaf weight", "transposed leaf", "non-leaf"])
def test_a_tensor_passed_twice_is_cast_per_argument_unless_the_weight_cache_serves_it(
        which: str) -> None:
    """Inputs: torch.mm(x, x) under bf16 autocast for x a float32 leaf requiring grad
    (torch's weight cache serves the second argument), a transposed view of one (a view:
    not cached) and a non-leaf (x * 1). Expected: torch's op log, forward and backward:
    one forward _to_copy to bf16 for the cached leaf, two for the others (one more, the
    backward of y.float(), in each log; torch's cached_cast runs per
    argument; ampref cast a repeated tensor once until 2026-11-28, found on
    linalg.matrix_power's OpInfo sample). Pass: equal logs."""
    def call() -> Any:
        g = torch.Generator().manual_seed(3)
        base = torch.randn(4, 4, generator=g)
        x = {"leaf weight": base.requires_grad_(),
             "transposed leaf": base.t().requires_grad_(),
             "non-leaf": base.requires_grad_() * 1}[which]
        return torch.mm(x, x)
    theirs, ours = _logged_call(call, False, torch.bfloat16), \
        _logged_call(call, True, torch.bfloat16)
    assert ours == theirs, _first_difference(theirs, ours)
    casts = sum(op == "_to_copy" and dt == ("torch.bfloat16",) for op, dt, _ in theirs)
    assert casts == (1 if which == "leaf weight" else 2) + 1  # + y.float()'s backward


def _step_dtypes(ctx: Any, x: Any, w: Any) -> list[str]:
    """Per use of one region object ``ctx`` (three ``with`` steps, then a decorated
    function called twice): the dtypes of a linear and of cross entropy on its output
    (an fp32 op), and of the linear after the exit."""
    def step() -> list[str]:
        y = torch.nn.functional.linear(x, w)
        loss = torch.nn.functional.cross_entropy(y, torch.tensor([0, 1]))
        return [str(y.dtype), str(loss.dtype)]
    seen: list[str] = []
    for _ in range(3):
        with ctx:
            seen += step()
        seen.append(str(torch.nn.functional.linear(x, w).dtype))
    run = ctx(step)
    seen += run() + run() + [str(torch.nn.functional.linear(x, w).dtype)]
    return seen


@pytest.mark.clause("TRC-AUT-001")
@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("emulated", [False, True], ids=["torch-numerics", "emulate"])
def test_one_bridge_autocast_object_serves_every_step_as_torchs_object_does(
        device: str, emulated: bool) -> None:
    """Inputs: ``ampref.torch.autocast(device, torch.float16)`` made once, entered in
    three steps and decorating a function called twice, with and without ``emulate``;
    each step a linear of float32 (2, 3) x (4, 3) operands and cross entropy on it.
    Expected: per step the dtypes ``torch.autocast("cpu", dtype=torch.float16)`` made
    once gives in the same uses (CPU and CUDA lists agree here: linear lower precision,
    cross entropy float32), and float32 after each exit (before, the second ``with``
    raised an AttributeError inside contextlib). Pass: equal lists."""
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    want = _step_dtypes(torch.autocast("cpu", dtype=torch.float16), x, w)
    with at.emulate() if emulated else nullcontext():
        got = _step_dtypes(at.autocast(device, torch.float16), x, w)
    assert got == want
    assert want[:3] == ["torch.float16", "torch.float32", "torch.float32"]
