"""What rotary position embeddings ask of the engine (ENG-TRG-001, ENG-SHP-002): sin and
cos, stack and outer, compared with torch; a RoPE written the way Llama ports write it
runs unchanged and equals torch's wherever both libraries round the same operations."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import ampref
from ampref.testing import assert_bitwise_equal

ulp_distance = np.frompyfunc(lambda a, b: abs(int(a) - int(b)), 2, 1)


@pytest.mark.clause("ENG-SHP-002")
@pytest.mark.parametrize("dim", [-3, -2, -1, 0, 1, 2])
@pytest.mark.parametrize("fmts", [("float32", "float32"), ("float16", "bfloat16"),
                                  ("bfloat16", "bfloat16")])
def test_stack_joins_along_a_new_dim_as_torch(dim: int, fmts: tuple[str, str]) -> None:
    """Inputs: two 2x3 tensors with values including -0.0, inf and a subnormal, in equal
    or mixed formats, every allowed dim. Expected: torch.stack's shape, dtype (fp16 with
    bf16 promotes to float32) and bits. Pass: equal dtype names and bits."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    rows = [np.array([[1.5, -0.0, np.inf], [2**-20, 3.0, -7.25]], np.float32),
            np.array([[0.0] * 3, [1.0] * 3], np.float32)]
    pairs = list(zip(rows, fmts, strict=True))
    ours = ampref.stack([ampref.tensor(r, f) for r, f in pairs], dim)
    theirs = torch.stack([torch.tensor(r, dtype=getattr(torch, f)) for r, f in pairs], dim)
    assert ours.shape == tuple(theirs.shape)
    assert_same_result(ours, theirs, f"stack dim {dim} {fmts}")


@pytest.mark.clause("ENG-SHP-002")
@pytest.mark.parametrize("fmts", [("float32", "float32"), ("float16", "float16"),
                                  ("float16", "bfloat16")])
def test_outer_is_one_rounded_product_per_element_as_torch(fmts: tuple[str, str]) -> None:
    """Inputs: 1-D tensors of 5 and 4 values (products that round in fp16, overflow to
    inf, and 0 * inf = NaN). Expected: torch.outer's dtype and bits (NaN any). Pass:
    equal."""
    torch = pytest.importorskip("torch")
    from torch_compare import assert_same_result
    a = np.array([1.1, -3.0, 300.0, 0.0, 2**-10], np.float32)
    b = np.array([0.3, 250.0, -np.inf, 7.0], np.float32)
    ours = ampref.outer(ampref.tensor(a, fmts[0]), ampref.tensor(b, fmts[1]))
    theirs = torch.outer(torch.tensor(a, dtype=getattr(torch, fmts[0])),
                         torch.tensor(b, dtype=getattr(torch, fmts[1])))
    assert_same_result(ours, theirs, f"outer {fmts}")


@pytest.mark.clause("ENG-SHP-002", "API-ERR-001")
@pytest.mark.parametrize("call, error, match", [
    (lambda: ampref.stack([ampref.ones(2, 3), ampref.ones(3, 2)]), ValueError,
     r"tensor 0 is \(2, 3\), tensor 1 is \(3, 2\)"),
    (lambda: ampref.stack([]), ValueError, "at least one tensor"),
    (lambda: ampref.stack([ampref.ones(2, 3)], 3), ValueError, "dim"),
    (lambda: ampref.stack([ampref.ones(2)], 0.5),  # type: ignore[arg-type]
     TypeError, "dim must be an int"),
    (lambda: ampref.outer(ampref.ones(2, 2), ampref.ones(2)), ValueError,
     r"input of shape \(2, 2\)"),
    (lambda: ampref.outer(ampref.ones(2), ampref.ones(1, 2)), ValueError,
     r"vec2 of shape \(1, 2\)"),
])
def test_stack_and_outer_refuse_what_torch_refuses(call: Any, error: Any, match: str) -> None:
    """Inputs: unequal shapes, no tensors, dim out of range or not an int, a 2-D outer
    argument (each refused by torch too). Expected: the error with the shapes or dim
    named. Pass: raises."""
    with pytest.raises(error, match=match):
        call()


ROPE = '''
def rope_tables(dim, length, theta=10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: dim // 2].float() / dim))
    angles = torch.outer(torch.arange(length).float(), freqs)
    emb = torch.cat([angles, angles], dim=-1)
    return emb, emb.cos(), emb.sin()


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([-x2, x1], dim=-1)


def apply_rope(x, cos, sin):
    return x * cos + rotate_half(x) * sin


def interleaved(x, cos, sin):
    pairs = torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)
    return x * cos + pairs * sin
'''


def _namespace(lib: Any) -> dict[str, Any]:
    ns: dict[str, Any] = {"torch": lib}
    exec(ROPE, ns)  # noqa: S102 - one script text for both libraries
    return ns


@pytest.mark.clause("ENG-TRG-001", "ENG-SHP-002", "ENG-RND-001")
def test_a_rope_script_runs_unchanged_and_equals_torch_where_both_round_alike() -> None:
    """Inputs: Llama's rotary embedding (theta ** (arange / dim), outer, cat, cos, sin,
    chunk, rotate_half) and the interleaved form (stack of strided slices) on a 2x4x8x16
    float32 activation. Expected: the angle tables equal torch's within 1 ulp (torch's
    float32 pow differs from a correctly rounded one by at most that), cos and sin of the
    same angles within 1 ulp of torch's (vectorised float32 sin/cos are not correctly
    rounded; ampref's are); given torch's tables, both rotations equal torch's bit for bit
    (products and sums are IEEE float32 in both). Pass: ulp bounds and bitwise."""
    torch = pytest.importorskip("torch")
    ours, theirs = _namespace(ampref), _namespace(torch)
    tables = [ours["rope_tables"](16, 8), theirs["rope_tables"](16, 8)]
    for k, name in enumerate(("angles", "cos", "sin")):
        a = tables[0][k].numpy().view(np.int32)
        b = tables[1][k].numpy().view(np.int32)
        assert int(ulp_distance(a, b).max()) <= 1, f"{name} differs by more than 1 ulp"
    x = np.random.default_rng(3).standard_normal((2, 4, 8, 16)).astype(np.float32)
    _, cos, sin = tables[1]
    for fn in ("apply_rope", "interleaved"):
        got = ours[fn](ampref.tensor(x), ampref.tensor(cos.numpy()), ampref.tensor(sin.numpy()))
        want = theirs[fn](torch.tensor(x), cos, sin)
        assert_bitwise_equal(got.numpy(), want.numpy(), msg=fn)


@pytest.mark.clause("ENG-TRG-001", "ENG-BWD-001")
def test_gradients_flow_through_the_rotation_to_the_activation_as_torchs() -> None:
    """Inputs: the rotation of a 1x2x4x8 float32 activation that requires grad, loss =
    sum of the output times fixed weights, the tables from torch. Expected: the input
    gradient equals torch's bit for bit (cat, chunk, neg, * and + have IEEE float32
    derivatives in both). Pass: bitwise."""
    torch = pytest.importorskip("torch")
    ours, theirs = _namespace(ampref), _namespace(torch)
    _, cos, sin = theirs["rope_tables"](8, 4)
    rng = np.random.default_rng(4)
    x, w = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(2))
    a = ampref.tensor(x, requires_grad=True)
    (ours["apply_rope"](a, ampref.tensor(cos.numpy()), ampref.tensor(sin.numpy()))
     * ampref.tensor(w)).sum().backward()
    t = torch.tensor(x, requires_grad=True)
    (theirs["apply_rope"](t, cos, sin) * torch.tensor(w)).sum().backward()
    assert_bitwise_equal(a.grad, t.grad.numpy())
