"""Autocast of ops outside aten follows the emulated device's kernels (TRC-AUT-005).

Oracles: torch's own ``AutocastCPU`` kernel for a rule registered with
``torch.library.register_autocast(op, "cpu", dtype)`` (torch applies it under
``torch.autocast("cpu")``; ampref must apply the same rule registered for ``"cuda"``
under ``ampref.torch.autocast("cuda")``), and ``tests/data/outside_autocast_cuda.json``:
torchvision 0.29.1's real ``AutocastCUDA`` kernels run on fake CUDA tensors
(``scripts/outside_autocast_record.py``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from ampref.torch import outsidecasts  # noqa: E402
from paths import DATA  # noqa: E402

RECORD = json.loads((DATA / "outside_autocast_cuda.json").read_text())


class Log(TorchDispatchMode):  # type: ignore[misc]
    """Each op below autocast with its floating inputs' (dtype, shape) and outputs' dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[Any] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        out = func(*args, **(kwargs or {}))
        ins = [(a.dtype, tuple(a.shape)) for a in [*args, *(kwargs or {}).values()]
               if isinstance(a, torch.Tensor) and a.is_floating_point()]
        outs = out if isinstance(out, (list, tuple)) else [out]
        self.ops.append((func.name(), ins, [o.dtype for o in outs]))
        return out


def _define(name: str) -> Any:
    """A custom op ``ampref_oc::name(x, y) -> (x * 2 + y, int64 count)``."""
    @torch.library.custom_op(f"ampref_oc::{name}", mutates_args=())
    # the annotations are torch's schema (custom_op reads them)
    def op(x: torch.Tensor, y: torch.Tensor) -> tuple[  # type: ignore[name-defined]
            torch.Tensor, torch.Tensor]:  # type: ignore[name-defined]
        return x * 2 + y, torch.ones(1, dtype=torch.int64)
    return op


TWICE_CUDA = _define("twice_cuda")
TWICE_CPU = _define("twice_cpu")
TWICE_BOTH = _define("twice_both")
torch.library.register_autocast("ampref_oc::twice_cuda", "cuda", torch.float16)
torch.library.register_autocast("ampref_oc::twice_cpu", "cpu", torch.float16)
torch.library.register_autocast("ampref_oc::twice_both", "cpu", torch.bfloat16)
torch.library.register_autocast("ampref_oc::twice_both", "cuda", torch.float16)

# an op registered by name (not a custom_op): torch keeps its rule in a closure
LIB = torch.library.Library("ampref_oc2", "DEF")
LIB.define("scaled(Tensor x, Tensor y) -> Tensor")
LIB.impl("scaled", lambda x, y: x * 3 + y, "CPU")
torch.library.register_autocast("ampref_oc2::scaled", "cuda", torch.float16, lib=LIB)


def _run(op: Any, region: Any) -> list[Any]:
    x, y = torch.randn(4), torch.randn(4, dtype=torch.float64)
    with region, Log() as log:
        op(x, y)
    return log.ops


@pytest.mark.clause("TRC-AUT-005")
def test_a_custom_ops_cuda_rule_casts_as_torch_applies_the_same_rule_on_the_cpu() -> None:
    """TRC-AUT-005. Inputs: a float32 x and a float64 y into two custom ops with one rule
    (float16), registered for "cuda" on one and for "cpu" on the other. Expected: ampref's
    CUDA region on the first logs exactly what torch.autocast("cpu") logs on the second
    (x cast to float16, y left float64: torch's eligibility). Pass: logs equal, and the
    op received float16."""
    ours = _run(torch.ops.ampref_oc.twice_cuda.default, at.autocast("cuda"))
    theirs = _run(torch.ops.ampref_oc.twice_cpu.default, torch.autocast("cpu", torch.float16))
    rename = [(n.replace("twice_cpu", "twice_cuda"), i, o) for n, i, o in theirs]
    assert ours == rename, (ours, theirs)
    assert ours[-1][1][0][0] == torch.float16


@pytest.mark.clause("TRC-AUT-005")
def test_a_rule_registered_only_for_the_cpu_does_not_cast_under_the_cuda_lists() -> None:
    """TRC-AUT-005. Inputs: the op whose only rule is for "cpu" (float16). Expected: under
    ampref's "cuda" region nothing is cast (CUDA autocast falls through it), under its
    "cpu" region torch's own kernel casts x to float16, as under torch.autocast("cpu").
    Pass: the op's input dtypes in each log."""
    op = torch.ops.ampref_oc.twice_cpu.default
    assert _run(op, at.autocast("cuda"))[-1][1][0][0] == torch.float32
    assert _run(op, at.autocast("cpu", torch.bfloat16)) == \
        _run(op, torch.autocast("cpu", torch.bfloat16))
    assert _run(op, at.autocast("cpu", torch.bfloat16))[-1][1][0][0] == torch.float16


@pytest.mark.clause("TRC-AUT-005")
def test_an_op_with_rules_on_both_devices_takes_the_emulated_devices() -> None:
    """TRC-AUT-005. Inputs: one op, bfloat16 for "cpu" and float16 for "cuda". Expected:
    float16 under ampref's "cuda" region, bfloat16 under its "cpu" region, and torch's
    CPU kernel back after the region. Pass: the op's first input dtype."""
    op = torch.ops.ampref_oc.twice_both.default
    assert _run(op, at.autocast("cuda"))[-1][1][0][0] == torch.float16
    assert _run(op, at.autocast("cpu"))[-1][1][0][0] == torch.bfloat16
    assert _run(op, torch.autocast("cpu"))[-1][1][0][0] == torch.bfloat16


@pytest.mark.clause("TRC-AUT-005")
def test_an_unreadable_cuda_rule_is_refused_by_name_until_declared() -> None:
    """TRC-AUT-005. Inputs: an op given a CUDA rule with torch.library.register_autocast
    by name (its rule lives in a closure). Expected: UnknownCastRuleError naming the op
    and ampref.torch.register_autocast; after that declaration (float16, outputs back to
    the input's dtype) x reaches the op in float16 and the output is float32 again.
    Pass: message, input and output dtypes."""
    op = torch.ops.ampref_oc2.scaled.default
    key = ("ampref_oc2::scaled", "cuda")
    try:
        with pytest.raises(at.UnknownCastRuleError, match=r"ampref_oc2::scaled.*register_"
                                                          r"autocast\('ampref_oc2::scaled'"):
            _run(op, at.autocast("cuda"))
        at.register_autocast("ampref_oc2::scaled", "cuda", torch.float16,
                             outputs_to_input_dtype=True)
        log = _run(op, at.autocast("cuda"))
        assert [e for e in log if e[0] == "ampref_oc2::scaled"][0][1][0][0] == torch.float16
        assert log[-1][2] == [torch.float32]  # the cast back
    finally:
        outsidecasts._DECLARED.pop(key, None)


def _shipped(op: str) -> Any:
    return outsidecasts.rule(op, "cuda")


@pytest.mark.clause("TRC-AUT-005")
@pytest.mark.parametrize("case", [c for c in RECORD["cases"] if c["inputs"] != "float32"],
                         ids=lambda c: f"{c['op']}-{c['inputs']}")
def test_torchvisions_shipped_rows_predict_the_recorded_cuda_kernels(case: dict[str, Any]) -> None:
    """TRC-AUT-005. Inputs: one recorded torchvision op with float16 or bfloat16 inputs
    under torch's real CUDA autocast (the data file). Expected, from the op's shipped
    row: one cast per floating input, in the row's order, to cast_to; the op sees only
    cast_to; a cast of every output back to the input dtype iff outputs_to_input_dtype.
    Pass: the recorded log has exactly that shape."""
    row = _shipped(case["op"])
    assert row is not None and row.source.startswith("pytorch/vision")
    log = case["cuda_autocast"]
    i = next(k for k, e in enumerate(log) if e[0] == case["op"])
    casts, call, after = log[:i], log[i], log[i + 1:]
    inputs = call[1]
    order = list(reversed(inputs)) if row.right_to_left else inputs
    assert [c[1][0][1] for c in casts] == [shape for _, shape in order]
    assert all(c[1][0][0] == f"torch.{case['inputs']}" and c[2] == [str(row.cast_to)]
               for c in casts)
    assert all(dt == str(row.cast_to) for dt, _ in inputs)
    assert len(after) == (len(call[2]) if row.outputs_to_input_dtype else 0)
    assert all(e[2] == [f"torch.{case['inputs']}"] for e in after)


@pytest.mark.clause("TRC-AUT-005")
def test_every_shipped_row_has_records_and_every_recorded_op_a_row() -> None:
    """TRC-AUT-005. Inputs: SHIPPED and the data file. Expected: the same op set, each in
    float16, bfloat16 and float32 (float32 inputs: no input cast; roi_pool's and the
    ps_ ops' int32 second output is still cast to float32, as their kernels do). Pass:
    sets equal; float32 logs start with the op."""
    recorded = {c["op"] for c in RECORD["cases"]}
    assert recorded == {r.op for r in outsidecasts.SHIPPED}
    assert sorted(c["inputs"] for c in RECORD["cases"]) == \
        sorted(["float16", "bfloat16", "float32"] * len(recorded))
    for c in RECORD["cases"]:
        if c["inputs"] == "float32":
            assert c["cuda_autocast"][0][0] == c["op"]


@pytest.mark.clause("TRC-AUT-005")
def test_torchvisions_ops_under_amprefs_cuda_region_log_what_the_record_holds() -> None:
    """TRC-AUT-005, end to end where torchvision's compiled ops load (skipped otherwise):
    each recorded case run on CPU tensors under ampref.torch.autocast("cuda"). Expected:
    the recorded log, op for op. Pass: equal logs for all 18 cases."""
    try:  # PyPI's torchvision beside a CPU torch fails to import ("torchvision::nms")
        import torchvision  # noqa: F401
        assert torch.ops.torchvision.nms.default is not None
    except (ImportError, AttributeError, RuntimeError) as e:
        pytest.skip(f"torchvision with its compiled ops: {type(e).__name__}")
    from paths import script as load

    script = load("outside_autocast_record")
    for c in RECORD["cases"]:
        case = script.CASES[c["op"].removeprefix("torchvision::")]
        got = script.on_ampref(case, getattr(torch, c["inputs"]), getattr(torch, c["lower"]))
        assert got == c["cuda_autocast"], (c["op"], c["inputs"], got)


@pytest.mark.clause("TRC-AUT-005")
@pytest.mark.parametrize("call, error, match", [
    (lambda: at.register_autocast("nonamespace", "cuda", torch.float16), ValueError,
     "'namespace::name'"),
    (lambda: at.register_autocast("ns::op.overload", "cuda", torch.float16), ValueError,
     "no overload"),
    (lambda: at.register_autocast("aten::mm", "cuda", torch.float16), ValueError,
     "aten op"),
    (lambda: at.register_autocast("ns::op", "tpu", torch.float16), ValueError,
     r"'tpu'.*\['cpu', 'cuda'\]"),
    (lambda: at.register_autocast("ns::op", "cuda", torch.int32), TypeError,
     "floating torch dtype"),
    (lambda: at.register_autocast("ns::op", "cuda", torch.float16,
                                  outputs_to_input_dtype=1), TypeError, "bool"),
    (lambda: at.register_autocast(3, "cuda", torch.float16), TypeError, "int"),
], ids=["no namespace", "overload", "aten", "device", "dtype", "flag", "op type"])
def test_register_autocast_refuses_bad_declarations_by_name(call: Any, error: type,
                                                            match: str) -> None:
    """TRC-AUT-005. Inputs: each bad argument. Expected: the named error type with the
    bad value and the choices. Pass: pytest.raises with the message pattern."""
    with pytest.raises(error, match=match):
        call()


@pytest.mark.clause("TRC-AUT-005")
def test_ops_given_as_torch_objects_resolve_to_their_qualified_name() -> None:
    """TRC-AUT-005. Inputs: the same op as a custom-op object, a packet and an overload.
    Expected: each declaration keyed by "ampref_oc::twice_cuda". Pass: rows' op names."""
    try:
        for op in (TWICE_CUDA, torch.ops.ampref_oc.twice_cuda,
                   torch.ops.ampref_oc.twice_cuda.default):
            assert at.register_autocast(op, "cpu", torch.float32).op == \
                "ampref_oc::twice_cuda"
    finally:
        outsidecasts._DECLARED.pop(("ampref_oc::twice_cuda", "cpu"), None)


@pytest.mark.clause("TRC-AUT-005")
def test_a_nested_cpu_region_inside_a_cuda_region_takes_the_cpus_kernels() -> None:
    """TRC-AUT-005. Inputs: the op with a bfloat16 CPU rule and a float16 CUDA rule,
    called in ampref.autocast("cpu") and in a disabled region, each nested in
    ampref.autocast("cuda"). Expected: bfloat16 (torch's CPU kernel), then no cast
    (float32); float16 again in the outer region after them. Pass: input dtypes."""
    op = torch.ops.ampref_oc.twice_both.default
    x, y = torch.randn(4), torch.randn(4)
    with at.autocast("cuda"):
        with at.autocast("cpu"), Log() as inner:
            op(x, y)
        with at.autocast("cuda", enabled=False), Log() as off:
            op(x, y)
        with Log() as outer:
            op(x, y)
    assert [e[1][0][0] for e in (inner.ops[-1], off.ops[-1], outer.ops[-1])] == \
        [torch.bfloat16, torch.float32, torch.float16]
