"""The engine: gradients of every op against float64 central differences and torch,
rounding points, determinism, graph semantics (specs/engine.md)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
import oracle
from engine_cases import cases, inputs

import ampref
from ampref.engine import functional as F
from ampref.accumulation import certified
from ampref.formats.exactsum import round_odd_exact
from ampref.testing import arrays

CASES = cases()


def _loss_weights(shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(99).standard_normal(shape)


def _scalar(fn, arrays):  # type: ignore[no-untyped-def]
    """sum(fn(*inputs) * W) in float64, W fixed random: a generic scalar objective."""
    ts = [ampref.tensor(a, "float64", requires_grad=True) for a in arrays]
    out = fn(*ts)
    w = ampref.tensor(_loss_weights(out.shape), "float64")
    return (out * w).sum(), ts


@pytest.mark.clause("ENG-BWD-001")
def test_every_public_op_has_a_gradient_case() -> None:
    """Inputs: the names in ampref.functional.__all__. Expected: each has a case in
    tests/engine_cases.py. Pass: none missing."""
    missing = [n for n in F.__all__ if not any(k == n or k.startswith(n + "_") for k in CASES)]
    assert missing == [], "public ops without a case in tests/engine_cases.py"


@pytest.mark.clause("ENG-BWD-001", "ENG-F64-001")
@pytest.mark.parametrize("op", sorted(CASES))
def test_every_op_gradient_matches_float64_central_differences(op: str) -> None:
    """Inputs: each op's case in float64 (fixed random inputs), loss sum(out * W).
    Expected: the engine's gradient equals central differences with step 1e-6. Pass:
    allclose rtol 1e-5, atol 1e-7 (a derivative check, not a rounding one)."""
    shapes, fn, _, dom = CASES[op]
    arrays = inputs(shapes, dom)
    loss, ts = _scalar(fn, arrays)
    loss.backward()
    h = 1e-6
    for k, a in enumerate(arrays):
        num = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            up, dn = [x.copy() for x in arrays], [x.copy() for x in arrays]
            up[k][idx] += h
            dn[k][idx] -= h
            num[idx] = (_scalar(fn, up)[0].item() - _scalar(fn, dn)[0].item()) / (2 * h)
        got = ts[k].grad
        assert got.dtype == np.float64
        np.testing.assert_allclose(got, num, rtol=1e-5, atol=1e-7, err_msg=f"{op} input {k}")


@pytest.mark.clause("ENG-BWD-001", "ENG-F64-001")
@pytest.mark.parametrize("op", sorted(k for k, v in CASES.items() if v[2] is not None))
def test_every_op_value_and_gradient_match_torch_float64(op: str) -> None:
    """Inputs: each op's case in float64, the same loss in torch float64. Expected: loss
    and every input gradient equal torch's. Pass: rtol 1e-10, atol 1e-12 (float64
    evaluation orders differ)."""
    torch = pytest.importorskip("torch")
    shapes, fn, tfn, dom = CASES[op]
    arrays = inputs(shapes, dom, seed=3)
    loss, ts = _scalar(fn, arrays)
    loss.backward()
    tt = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]
    assert tfn is not None
    tout = tfn(*tt)
    weights = torch.tensor(_loss_weights(tuple(tout.shape)))
    (tout * weights).sum().backward()
    np.testing.assert_allclose(loss.item(), float((tout.detach() * weights).sum()),
                               rtol=1e-12, atol=1e-12)
    for t, ref in zip(ts, tt, strict=True):
        np.testing.assert_allclose(t.grad, ref.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=op)


def _hex(a: np.ndarray) -> str:
    return " ".join(f"{v:08x}" for v in np.asarray(a, np.float32).reshape(-1).view(np.uint32)[:8])


@pytest.mark.clause("ENG-MM-001")
def test_matmul_is_the_exact_dot_product_rounded_once_to_float32() -> None:
    """Inputs: 17x40 @ 40x9 float32 with a 2^-20..2^19 row, cancelling columns and thirds.
    Expected: each entry the exact dot product rounded once to float32 (round-to-odd
    float64 then float32 oracle). Pass: bitwise equal."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((17, 40)).astype(np.float32)
    b = rng.standard_normal((40, 9)).astype(np.float32)
    a[3] = 2.0 ** np.arange(-20, 20)  # wide range in one row
    b[:, 2] = -b[:, 1]
    a[5, :] = 1.0
    b[:, 4] = 1.0 / 3
    got = F.matmul(ampref.tensor(a), ampref.tensor(b)).numpy()
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = np.array([[np.float32(round_odd_exact(A[i] * B[:, j])) for j in range(9)]
                     for i in range(17)])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{_hex(got)} != {_hex(want)}"


@pytest.mark.clause("ENG-MM-001")
def test_certified_matmul_falls_back_exactly_on_heavy_cancellation() -> None:
    """Inputs: [1e8, 1, -1e8, 3e-5] . ones, whose float64 dot cancels. Expected: the
    certified path refines or falls back and returns fp32(1.00003). Pass: that value and
    the fallback counter not decreasing."""
    a = np.array([[1e8, 1.0, -1e8, 3e-5]], np.float32)
    b = np.ones((4, 1), np.float32)
    before = certified.STATS.fallbacks
    got = certified.matmul_f32(a, b)
    assert certified.STATS.fallbacks >= before  # refined or exact, never the float64 guess
    assert got[0, 0] == np.float32(1.00003)


@pytest.mark.clause("ENG-RED-001")
def test_sum_is_the_exact_sum_rounded_once_whatever_the_order() -> None:
    """Inputs: 64 rows of 33 float32 values over 2^-30..2^30, and the same columns
    permuted. Expected: each row's exact sum rounded once to float32, the same for the
    permutation. Pass: bitwise equal both times."""
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((64, 33)) * 2.0 ** rng.integers(-30, 30, (64, 33))).astype(np.float32)
    got = F.sum(ampref.tensor(x), 1).numpy()
    want = np.array([np.float32(round_odd_exact(r.astype(np.float64))) for r in x])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), f"{_hex(got)} != {_hex(want)}"
    perm = rng.permutation(33)
    again = F.sum(ampref.tensor(x[:, perm]), 1).numpy()
    assert np.array_equal(again.view(np.uint32), got.view(np.uint32))


@pytest.mark.clause("ENG-RND-001")
def test_float16_elementwise_ops_round_float32_results_once_like_ml_dtypes() -> None:
    """Inputs: 1000 random fp16 pairs; a bf16 tensor of the same values. Expected:
    add/mul/div equal NumPy's fp32 result cast to fp16; the bf16 values equal ml_dtypes'
    cast. Pass: bitwise equal."""
    import ml_dtypes

    rng = np.random.default_rng(7)
    a = rng.standard_normal(1000).astype(np.float16)
    b = rng.standard_normal(1000).astype(np.float16)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    ta, tb = ampref.tensor(a32, "float16"), ampref.tensor(b32, "float16")
    for name, got, ref in [
        ("add", (ta + tb).numpy(), (a32 + b32).astype(np.float16)),
        ("mul", (ta * tb).numpy(), (a32 * b32).astype(np.float16)),
        ("div", (ta / tb).numpy(), (a32 / b32).astype(np.float16)),
    ]:
        assert np.array_equal(got.astype(np.float16).view(np.uint16), ref.view(np.uint16)), name
    bf = ampref.tensor(a.astype(np.float32), "bfloat16")
    ref = a.astype(np.float32).astype(ml_dtypes.bfloat16)
    assert np.array_equal(bf.numpy().astype(ml_dtypes.bfloat16).view(np.uint16),
                          ref.view(np.uint16))


@pytest.mark.clause("ENG-TEN-001")
def test_values_stored_in_a_low_format_are_exactly_representable() -> None:
    """Inputs: an 8x8 fp16 tensor and gelu(x @ x.T). Expected: both in fp16, every stored
    value an fp16 value. Pass: a round trip through float16 changes nothing."""
    rng = np.random.default_rng(8)
    x = ampref.tensor(rng.standard_normal((8, 8)), "float16")
    y = F.gelu(F.matmul(x, x.T))
    for t in (x, y):
        assert t.format.name == "float16"
        d = t.numpy()
        assert np.array_equal(d.astype(np.float16).astype(np.float32), d)


@pytest.mark.clause("ENG-BWD-002")
def test_backward_rounds_gradients_to_the_format_recorded_in_forward() -> None:
    """Inputs: fp32 x cast to bf16, times 1.1, summed in fp32. Expected: x's gradient is
    1.1 rounded to bf16 everywhere (the cast's gradient enters in bf16). Pass: equal."""
    x = ampref.tensor(np.linspace(-2, 2, 12).reshape(3, 4), "float32", requires_grad=True)
    h = x.to("bfloat16")
    y = (h * 1.1).sum(dtype="float32")
    y.backward()
    # d/dx of (bf16(x) * 1.1): the gradient 1.1 is rounded to bf16 where it enters h
    expect = ampref.quantize(np.array([1.1], np.float32), "bfloat16")[0]
    assert np.all(x.grad == expect)


@pytest.mark.clause("ENG-BWD-003")
def test_backward_is_iterative_and_handles_ten_thousand_deep_chains() -> None:
    """Inputs: a chain of 10,000 multiplications by 1. Expected: backward completes (no
    recursion limit) with gradient 1. Pass: grad == 1."""
    x = ampref.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(10_000):
        y = y * 1.0
    y.sum().backward()
    assert x.grad[0] == 1.0


@pytest.mark.clause("ENG-BWD-003")
def test_gradients_are_bitwise_identical_run_to_run() -> None:
    """Inputs: the same seeded TransformerBlock and input twice under fp16 autocast.
    Expected: every parameter gradient identical. Pass: bitwise equal."""
    def run() -> list[np.ndarray]:
        m = ampref.nn.TransformerBlock(16, 4, seed=3)
        x = ampref.tensor(np.random.default_rng(1).standard_normal((2, 6, 16)))
        with ampref.autocast("cuda", "float16"):
            out = m(x)
        F.sum(out, dtype="float32").backward()
        return [p.grad.copy() for p in m.parameters()]

    a, b = run(), run()
    for ga, gb in zip(a, b, strict=True):
        assert np.array_equal(ga.view(np.uint32), gb.view(np.uint32))


@pytest.mark.clause("ENG-BWD-003")
def test_gradient_accumulates_over_backward_calls_and_shared_inputs() -> None:
    """Inputs: x = [2, 3]; backward of sum(x*x + x), then of sum(x * 1). Expected: grads
    [5, 7], then [6, 8]. Pass: equal."""
    x = ampref.tensor([2.0, 3.0], requires_grad=True)
    (x * x + x).sum().backward()
    assert list(x.grad) == [5.0, 7.0]
    (x * 1.0).sum().backward()
    assert list(x.grad) == [6.0, 8.0]


@pytest.mark.clause("ENG-DRP-001")
def test_dropout_mask_is_a_function_of_seed_and_offset_only() -> None:
    """Inputs: 100x100 ones, p 0.3, seeds 11 (twice) and 12; the second half again with
    offset 5000. Expected: same seed same mask, other seed another; kept share within 0.02
    of 0.7, kept values fp32(1/0.7); the offset call equals the second half. Pass: all."""
    x = ampref.tensor(np.ones((100, 100)))
    a = F.dropout(x, 0.3, seed=11).numpy()
    b = F.dropout(x, 0.3, seed=11).numpy()
    c = F.dropout(x, 0.3, seed=12).numpy()
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    kept = a != 0
    assert abs(kept.mean() - 0.7) < 0.02
    assert np.all(a[kept] == np.float32(1 / 0.7))
    tail = F.dropout(ampref.tensor(np.ones(50 * 100)), 0.3, seed=11, offset=50 * 100).numpy()
    assert np.array_equal(tail, a[50:].reshape(-1))


@pytest.mark.clause("ENG-DRP-001")
def test_dropout_keeps_an_element_whose_word_equals_the_threshold_and_drops_one_below() -> None:
    """Inputs: 64 ones; their seed-7 words w_i (FMT-SR-002's recipe in tests/oracle.py); p =
    w_i / 2^32 for five chosen i (smallest word, largest word, three between), and p = (w_i
    + 1) / 2^32. Expected: element j dropped iff w_j < round(p 2^32), so with p = w_i/2^32
    element i is kept and with (w_i + 1)/2^32 dropped; every other element follows the same
    rule. Also p = 1 - 2^-34 (threshold 2^32): everything dropped. Pass: masks equal."""
    words = np.array([oracle.sr_bits(7, i) for i in range(64)], dtype=np.uint64)
    x = ampref.tensor(np.ones(64))
    order = np.argsort(words)
    for i in (order[0], order[-1], order[10], order[31], order[50]):
        for threshold in (int(words[i]), int(words[i]) + 1):
            p = threshold / 2.0**32
            if not 0.0 < p < 1.0:
                continue
            kept = F.dropout(x, p, seed=7).numpy() != 0
            want = words >= threshold
            assert np.array_equal(kept, want), (f"p = {threshold:#x}/2^32: kept "
                                                f"{np.flatnonzero(kept != want).tolist()} "
                                                f"wrongly")
    assert not F.dropout(x, 1.0 - 2.0**-34, seed=7).numpy().any()


@pytest.mark.clause("ENG-DRP-001")
def test_dropout_outside_training_or_with_p_zero_returns_the_input_and_draws_nothing() -> None:
    """Inputs: float32 [1.5, -0, NaN, inf, 2^-149] with p in {0.3, 1.0}; F.dropout with
    training=False (seeded and seedless), and with p = 0 in training; nn.Dropout(0.3) in
    eval mode. Expected (torch's F.dropout(training=False) and nn.Dropout.eval()): the input
    tensor itself, its bits unchanged; the global generator's state and the layer's
    counter do not move. Pass: identity, equal bit patterns, equal states."""
    from ampref.engine.creation import default_generator
    from ampref.engine.nn.modules import Dropout

    words = np.array([0x3FC00000, 0x80000000, 0x7FC00000, 0x7F800000, 0x1], np.uint32)
    x = ampref.tensor(words.view(np.float32))
    before = default_generator().state_dict()
    calls = [F.dropout(x, p, training=False, **kw) for p in (0.3, 1.0)
             for kw in ({}, {"seed": 5})] + [F.dropout(x, 0.0, seed=5)]
    layer = Dropout(0.3, seed=5)
    layer.eval()
    calls.append(layer(x))
    for out in calls:
        assert out is x
        got = out.numpy().view(np.uint32)
        assert np.array_equal(got, words), [hex(w) for w in got]
    assert default_generator().state_dict() == before and layer.offset == 0


@pytest.mark.clause("ENG-SPC-001")
def test_nan_and_inf_propagate_with_ieee_semantics() -> None:
    """Inputs: [NaN, inf, -inf, 0, -1]; fp16 60000 + 60000. Expected: relu(NaN) NaN,
    exp(inf) inf, exp(-inf) 0, log(0) -inf, log(-1) NaN; fp16 overflow to inf. Pass: each."""
    x = ampref.tensor([np.nan, np.inf, -np.inf, 0.0, -1.0])
    assert np.isnan(F.relu(x).numpy()[0])
    assert F.exp(x).numpy()[1] == np.inf and F.exp(x).numpy()[2] == 0.0
    lg = F.log(x).numpy()
    assert lg[3] == -np.inf and np.isnan(lg[4])
    big = ampref.tensor([60000.0], "float16")
    assert (big + big).numpy()[0] == np.inf  # fp16 overflow -> inf


def test_mixing_backends_raises_type_error_naming_both() -> None:
    class Fake:
        name = "cupy"
        xp = np

    a = ampref.tensor([1.0])
    b = ampref.tensor([1.0])
    b.backend = Fake()  # type: ignore[assignment]  # only the name matters here
    with pytest.raises(TypeError, match="numpy and cupy"):
        a + b


def test_bad_inputs_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown format"):
        ampref.tensor([1.0], "float13")
    with pytest.raises(ValueError, match="shapes do not chain"):
        ampref.tensor(np.ones((2, 3))) @ ampref.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"\[0, 5\)"):
        F.cross_entropy(ampref.tensor(np.ones((2, 5))), np.array([0, 7]))
    with pytest.raises(RuntimeError, match="does not require grad"):
        ampref.tensor([1.0]).sum().backward()
    with pytest.raises(ValueError, match=r"dim 4 is out of range for a tensor of shape \(2, 3\)"):
        F.softmax(ampref.tensor(np.ones((2, 3))), dim=4)
    with pytest.raises(ValueError, match=r"layer_norm: weight/bias shape \(4,\)"):
        F.layer_norm(ampref.tensor(np.ones((2, 3))), (3,), ampref.tensor(np.ones(4)))
    with pytest.raises(ValueError, match=r"normalized_shape \(4,\) must be the trailing dims"):
        F.layer_norm(ampref.tensor(np.ones((2, 3))), 4)
    with pytest.raises(ValueError,
                       match=r"layer_norm: eps must be a finite number >= 0, got -1e-05"):
        F.layer_norm(ampref.tensor(np.ones((2, 3))), 3, eps=-1e-5)
    with pytest.raises(ValueError, match=r"dim 2 is out of range"):
        F.transpose(ampref.tensor(np.ones((2, 3))), 0, 2)
    with pytest.raises(TypeError, match="masked_fill needs a boolean mask"):
        F.masked_fill(ampref.tensor(np.ones(2)), np.array([1, 0]), 0.0)
    with pytest.raises(TypeError, match="attn_mask must be boolean .* or a floating"):
        q = ampref.tensor(np.ones((2, 3)))
        F.scaled_dot_product_attention(q, q, q, np.zeros((2, 2)))
    with pytest.raises(TypeError, match="ampref.Tensor or a real number"):
        ampref.tensor([1.0]) + "x"  # type: ignore[operator]


@pytest.mark.clause("ENG-PRM-001")
def test_promotion_follows_torch_and_python_numbers_are_weak() -> None:
    """Inputs: fp16 + fp32, fp16 + bf16, fp16 + fp64, fp16 * 0.1. Expected: float32,
    float32, float64, float16; the last value fp16(fp32(1.5) * fp32(0.1)). Pass: formats
    and value."""
    h, b = ampref.tensor([1.5], "float16"), ampref.tensor([1.5], "bfloat16")
    s, d = ampref.tensor([1.5]), ampref.tensor([1.5], "float64")
    assert (h + s).format.name == "float32"
    assert (h + b).format.name == "float32"
    assert (h + d).format.name == "float64"
    assert (h * 0.1).format.name == "float16"
    want = np.float16(np.float32(1.5) * np.float32(0.1))  # scalar to float32 first
    assert (h * 0.1).numpy()[0] == np.float32(want)


@pytest.mark.clause("ENG-CST-001")
def test_cast_rounds_once_and_returns_gradient_in_the_source_format() -> None:
    """Inputs: fp32 1 + 2^-11 + 2^-23 cast to fp16 and times 3. Expected: 1 + 2^-10
    (rounded up once); the gradient 3 in float32. Pass: both."""
    v = np.float32(1 + 2**-11 + 2**-23)  # just above an fp16 tie: must round up
    x = ampref.tensor([v], requires_grad=True)
    y = x.to("float16")
    assert y.numpy()[0] == np.float32(1 + 2**-10)
    (y * 3.0).sum().backward()
    assert x.grad.dtype == np.float32 and x.grad[0] == 3.0


@pytest.mark.clause("ENG-IDX-001")
def test_repeated_index_gradients_add_up() -> None:
    """Inputs: x = 0..3 indexed at [1, 1, 3, 1], summed. Expected: gradient [0, 3, 0, 1].
    Pass: equal."""
    x = ampref.tensor(np.arange(4.0), requires_grad=True)
    x[np.array([1, 1, 3, 1])].sum().backward()
    assert list(x.grad) == [0.0, 3.0, 0.0, 1.0]


@pytest.mark.clause("ENG-IDX-002")
def test_embedding_gradient_rows_are_exact_sums_rounded_once() -> None:
    """Inputs: ids [2, 2, 2, 0], output gradients [2^24, 1, 1, 5]. Expected: row 2 = 2^24 +
    2 (the exact sum rounded once; sequential float32 gives 2^24), row 0 = 5, row 1 = +0.
    Pass: all."""
    w = ampref.tensor(np.zeros((3, 1)), requires_grad=True)
    ids = np.array([2, 2, 2, 0])
    g = np.array([[2**24], [1.0], [1.0], [5.0]], np.float32)
    F.embedding(ids, w).backward(g)
    # sequential float32 would give 2^24 + 1 -> 2^24, then + 1 -> 2^24; exact is 2^24 + 2
    assert w.grad[2, 0] == np.float32(2**24 + 2) and w.grad[0, 0] == 5.0
    assert w.grad[1, 0] == 0.0 and not np.signbit(w.grad[1, 0])  # no tokens: +0


@pytest.mark.clause("ENG-IDX-002", "ENG-SPC-001")
def test_embedding_gradient_keeps_a_nan_in_its_own_row_and_zero_rows_positive() -> None:
    """Inputs: ids [[3, 1], [3, 0]] with NaN, inf and -0 output gradients. Expected: NaN
    and inf only in row 3; rows 0-2 +0 (sums of -0 and empty rows). Pass: all."""
    w = ampref.tensor(np.zeros((4, 2)), requires_grad=True)
    ids = np.array([[3, 1], [3, 0]])
    g = np.array([[[np.nan, 1.0], [-0.0, -0.0]], [[2.0, np.inf], [-0.0, -0.0]]], np.float32)
    F.embedding(ids, w).backward(g)
    got = w.grad
    assert np.isnan(got[3, 0]) and got[3, 1] == np.inf  # NaN + 2, 1 + inf: row 3 only
    assert not np.isnan(got[:3]).any() and not np.isinf(got[:3]).any()
    # rows 0 and 1 sum -0 values, row 2 has no tokens: all +0
    assert (got[:3] == 0).all() and not np.signbit(got[:3]).any()


@pytest.mark.clause("ENG-NRM-001")
def test_softmax_follows_its_written_steps_with_an_exact_sum() -> None:
    """Inputs: 6 rows of 37 float32 values (x4). Expected: e = fp32(exp(x - max)), s = the
    exact sum of e rounded once (rational oracle), y = fp32(e / s). Pass: bitwise equal."""
    from fractions import Fraction

    from oracle import round_scalar

    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 37)) * 4).astype(np.float32)
    got = F.softmax(ampref.tensor(x), -1).numpy()
    for r in range(6):
        e = np.exp(x[r].astype(np.float64) - x[r].max()).astype(np.float32)
        code = round_scalar(sum(Fraction(float(v)) for v in e), ampref.float32, "nearest_even")
        # the exact sum rounded once by the rational oracle
        s = np.array(code, np.uint32).view(np.float32)
        want = e / s
        assert np.array_equal(got[r].view(np.uint32),
                              want.view(np.uint32)), f"row {r}: {_hex(got[r])}"


@pytest.mark.clause("ENG-NRM-001")
def test_layer_norm_output_is_normalised_and_in_the_input_format() -> None:
    """Inputs: a 4x64 bf16 tensor (mean 7, std 50). Expected: output in bf16 with row means
    within 0.02 of 0 and standard deviations within 0.02 of 1. Pass: both (a bound: bf16
    outputs)."""
    x = ampref.tensor(np.random.default_rng(2).standard_normal((4, 64)) * 50 + 7, "bfloat16")
    y = F.layer_norm(x, x.shape[-1:])
    assert y.format.name == "bfloat16"
    v = y.numpy().astype(np.float64)
    assert np.all(np.abs(v.mean(-1)) < 0.02) and np.all(np.abs(v.std(-1) - 1) < 0.02)


@pytest.mark.clause("ENG-CNV-001")
def test_conv2d_outputs_are_exact_dot_products_rounded_once() -> None:
    """Inputs: (2, 3, 6, 5) input, (4, 3, 3, 3) weights, bias, stride 2, padding 1.
    Expected: each output fp32(fp32(exact patch dot) + b). Pass: bitwise equal everywhere."""
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 6, 5)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    got = F.conv2d(ampref.tensor(x), ampref.tensor(w), ampref.tensor(b), stride=2,
                   padding=1).numpy()
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    for n, o, i, j in np.ndindex(*got.shape):
        patch = xp[n, :, 2 * i:2 * i + 3, 2 * j:2 * j + 3].reshape(-1)
        dot = np.float32(round_odd_exact(patch * w[o].astype(np.float64).reshape(-1)))
        want = np.float32(dot + b[o])
        assert got[n, o, i, j].view(np.uint32) == want.view(np.uint32), \
            f"{(n, o, i, j)}: {got[n, o, i, j].view(np.uint32):08x} != {want.view(np.uint32):08x}"


def test_conv2d_rejects_mismatched_shapes_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match="equal C"):
        F.conv2d(ampref.tensor(np.ones((1, 2, 4, 4))), ampref.tensor(np.ones((1, 3, 2, 2))))
    with pytest.raises(ValueError, match="does not fit"):
        F.conv2d(ampref.tensor(np.ones((1, 1, 2, 2))), ampref.tensor(np.ones((1, 1, 3, 3))))


def _cast_oracle(v32: np.ndarray, fmt: str) -> np.ndarray:
    """NumPy's float16 cast or ml_dtypes' bfloat16 cast of float32 values (independent
    of ampref's rounding kernels)."""
    import ml_dtypes

    dt = np.float16 if fmt == "float16" else ml_dtypes.bfloat16
    with np.errstate(over="ignore"):
        return v32.astype(dt).astype(np.float32)


@pytest.mark.clause("ENG-RND-001", "ENG-SPC-001")
@given(fmt=st.sampled_from(["float16", "bfloat16"]),
       op=st.sampled_from(["add", "sub", "mul", "div", "neg", "relu"]), data=st.data())
def test_low_precision_elementwise_ops_equal_float32_arithmetic_then_the_peer_cast(
        fmt: str, op: str, data: st.DataObject) -> None:
    """Inputs: hypothesis-drawn fp16/bf16 vectors with NaN and inf; add, sub, mul, div,
    neg, relu. Expected: the float32 result cast by NumPy (fp16) or ml_dtypes (bf16). Pass:
    NaN where the peer is NaN, every other value bitwise equal."""
    a = data.draw(arrays(fmt, 8, allow_nan=True, allow_infinity=True))
    b = data.draw(arrays(fmt, 8, allow_nan=True, allow_infinity=True))
    ta, tb = ampref.tensor(a, fmt), ampref.tensor(b, fmt)
    with np.errstate(all="ignore"):
        ref32 = {"add": a + b, "sub": a - b, "mul": a * b, "div": a / b, "neg": -a,
                 # torch's relu keeps x unless x < 0: relu(-0) = -0 (ENG-SPC-001), which
                 # np.maximum(-0, 0) = +0 does not
                 "relu": np.where(a < 0, np.zeros_like(a), a)}[op]
        got = {"add": lambda: ta + tb, "sub": lambda: ta - tb, "mul": lambda: ta * tb,
               "div": lambda: ta / tb, "neg": lambda: -ta, "relu": lambda: F.relu(ta)}[op]().numpy()
    want = _cast_oracle(ref32.astype(np.float32), fmt)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32)), \
        f"{op} {fmt}: {_hex(got)} != {_hex(want)}"
