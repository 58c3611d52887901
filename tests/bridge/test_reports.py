"""Reports a user can act on (TRC-SHD-002..004, TRC-REC-002): masks are not hazards, each
row shows its worst element with a relative error, saved statistics are measured apart,
definition differences carry their clause, emulate's table puts torch-computed ops first,
quantized linears and skipped convolutions are named."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
at = pytest.importorskip("ampref.torch")

from ampref.torch.measures import compare  # noqa: E402
from ampref.torch.report import OpRecord  # noqa: E402

import zoo  # noqa: E402


class Overflowing(torch.nn.Module):  # type: ignore[misc,name-defined]
    """zoo's GPT (masked_fill(-inf) in every block) with one planted fp16 overflow."""

    def __init__(self) -> None:
        super().__init__()
        self.gpt = zoo.GPT()
        self.boost = torch.nn.Linear(zoo.VOCAB, zoo.VOCAB)

    def forward(self, ids: Any) -> Any:
        logits = self.gpt(ids)
        return (self.boost(logits).half() * 1e6).float()  # |x| * 1e6 > 65504: inf


@pytest.mark.clause("TRC-SHD-002", "TRC-SHD-003")
def test_a_planted_overflow_heads_the_table_and_masks_are_counted_apart() -> None:
    """Input: a minGPT whose attention masks with masked_fill(-inf) in both blocks, plus
    one layer whose fp16 product overflows, one forward and backward under shadow.
    Expected: the overflowing mul is the first row with inf from finite inputs; the
    masked_fill rows count their -inf as masks (intended), none as hazards. Pass: both."""
    torch.manual_seed(0)
    model = Overflowing()
    ids = torch.randint(0, zoo.VOCAB, (2, zoo.CTX))
    with at.shadow(model) as sh:
        model(ids).sum().backward()
    rows = sh.report.rows()
    assert rows[0].op == "mul" and rows[0].nonfinite_from_finite > 0, rows[0]
    masks = [r for r in rows if r.op == "masked_fill" and "(backward)" not in r.module]
    assert len(masks) == 2 and all(r.intended_nonfinite > 0 and r.nonfinite_from_finite == 0
                         for r in masks)
    table = sh.report.table(limit=3)
    assert "masks" in table.splitlines()[0] and "| mul |" in table.splitlines()[2]


@pytest.mark.clause("TRC-SHD-001", "TRC-SHD-004")
def test_a_row_shows_its_worst_element_with_ulps_and_relative_error() -> None:
    """Input: torch's and ampref's float32 results differing at index 1 by 1 ulp and at
    index 3 by 5 ulps. Expected: 2 mismatches, max ulps 5, the worst element index 3 with
    both values in hex, its input in hex, and a relative error 5 * 2^-23 / 1.5.
    Pass: each field."""
    ours = torch.tensor([1.0, 1.5, 2.0, 1.5])
    theirs = ours.clone()
    theirs[1] = torch.nextafter(ours[1], torch.tensor(2.0))
    theirs[3] = ours[3] + 5 * 2.0**-23
    rec = OpRecord(module="m", op="exp")
    compare(rec, "exp", (torch.zeros(4),), theirs, ours)
    assert (rec.mismatches, rec.max_ulps) == (2, 5)
    assert rec.first["index"] == 3 and rec.first["torch"].startswith("0x3fc00005")
    assert rec.first["inputs"] == ["0x0 (0.0)"]
    assert math.isclose(rec.max_rel, 5 * 2.0**-23 / 1.5, rel_tol=1e-12)


@pytest.mark.clause("TRC-SHD-004")
def test_saved_statistics_are_measured_by_relative_error_not_as_results() -> None:
    """Input: native_layer_norm outputs (result, mean, rstd) where only the saved mean
    differs: torch's 1e-9 vs ampref's 0 would be billions of ulps. Expected: no
    mismatch and no ulps for the row, the mean's relative error in saved_max_rel.
    Pass: mismatches 0, max_ulps 0, saved_max_rel > 0."""
    y = torch.ones(2, 4)
    ours = (y, torch.tensor([[0.0], [1e-9]]), torch.ones(2, 1))
    theirs = (y.clone(), torch.tensor([[1e-9], [1e-9]]), torch.ones(2, 1))
    rec = OpRecord(module="m", op="native_layer_norm")
    compare(rec, "native_layer_norm", (y,), theirs, ours)
    assert (rec.mismatches, rec.max_ulps) == (0, 0) and rec.saved_max_rel > 0


@pytest.mark.clause("TRC-SHD-004", "TRC-PWO-001")
def test_adamws_lerp_rows_agree_and_its_square_root_rows_name_the_definition_difference(
        ) -> None:
    """Input: one AdamW step of an MLP under shadow (torch's lerp_ for the first moment,
    sqrt for the second). Expected: every lerp row agrees with torch word for word (the
    bridge fuses it as torch's kernel does); at least one sqrt row differs (torch's
    vectorised root is not correctly rounded) and every differing sqrt row's note names
    TRC-PWO-001. Pass: all three."""
    torch.manual_seed(0)
    c = zoo.case("mlp")
    opt = torch.optim.AdamW(c.model.parameters(), lr=1e-2, foreach=False)
    c.loss(c.model(c.inputs)).backward()
    with at.shadow(c.model) as sh:
        opt.step()
    rows = sh.report.rows()
    lerps = [r for r in rows if r.op.startswith("lerp")]
    assert lerps and all(r.mismatches == 0 for r in lerps), [(r.op, r.mismatches) for r in lerps]
    roots = [r for r in rows if r.op.startswith("sqrt") and r.mismatches]
    assert roots and all("TRC-PWO-001" in r.note for r in roots)


@pytest.mark.clause("TRC-SHD-004", "TRC-PWO-001")
def test_an_rsqrt_row_that_differs_names_the_definition_difference() -> None:
    """Input: ``torch.rsqrt`` of 1,024 float32 values in [0.02, 0.98] under shadow
    (torch divides by a float32 root: two roundings; ampref rounds 1/sqrt once).
    Expected: the row differs on some words and its note names TRC-PWO-001. Pass:
    both."""
    x = torch.rand(1024, generator=torch.Generator().manual_seed(5)) * 0.96 + 0.02
    with at.shadow() as sh:
        torch.rsqrt(x)
    rows = [r for r in sh.report.rows() if r.op == "rsqrt"]
    assert rows and rows[0].mismatches > 0 and "TRC-PWO-001" in rows[0].note


@pytest.mark.clause("TRC-SHD-001")
def test_shadow_takes_fallback_like_emulate() -> None:
    """Input: shadow(model, fallback=...) with 'torch', 'error' and 'numpy', and an op
    without a reference (the Hurwitz zeta function). Expected: 'torch' records it as not
    emulated, 'error' raises UnsupportedOpError naming it, 'numpy' is refused with the
    choices.
    Pass: the three behaviours."""
    x = torch.randn(4)
    with at.shadow(fallback="torch") as sh:
        torch.special.zeta((x * 2.0).abs() + 1.5, 2.0)
    assert [r.op for r in sh.report.not_emulated()] == ["special_zeta"]
    with pytest.raises(at.UnsupportedOpError, match="special_zeta"):
        with at.shadow(fallback="error"):
            torch.special.zeta((x * 2.0).abs() + 1.5, 2.0)
    with pytest.raises(ValueError, match="fallback must be 'error' or 'torch'"):
        at.shadow(fallback="numpy")


@pytest.mark.clause("TRC-EMU-002")
def test_emulates_table_lists_the_ops_torch_computed_first() -> None:
    """Input: mul, the Hurwitz zeta function (no reference) and exp under
    emulate(fallback='torch'). Expected: the table's first row is special_zeta, 'no
    (torch)', with its reason; emulate's table has no mismatch columns. Pass: row order
    and header."""
    x = torch.randn(4)
    with at.emulate(fallback="torch") as em:
        torch.exp(torch.special.zeta((x * 2.0).abs() + 1.5, 2.0))
    lines = em.report.table().splitlines()
    assert "mismatches" not in lines[0]
    assert "| special_zeta |" in lines[2] and "no (torch)" in lines[2]


@pytest.mark.clause("TRC-REC-002")
def test_quantized_linears_and_skipped_convolutions_are_in_the_report() -> None:
    """Input: a conv + linear model, one step under emulate(recipe='mxfp8').
    Expected: a 'linear (recipe)' row for the linear with recipe mxfp8, profile te and
    operand statistics for x, w and g; the convolution row noted as not quantized.
    Pass: both rows as stated."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                torch.nn.Linear(4 * 6 * 6, 32))
    with at.emulate(model, recipe="mxfp8") as em:
        model(torch.randn(2, 3, 8, 8)).sum().backward()
    lin = [r for r in em.report.rows() if r.op == "linear (recipe)"]
    assert len(lin) == 1 and lin[0].module == "Sequential.2"
    assert lin[0].quant["recipe"] == "mxfp8" and set(lin[0].quant["stats"]) == {"x", "w", "g"}
    assert all(np.isfinite(v) for s in lin[0].quant["stats"].values() for v in s.values())
    conv = [r for r in em.report.rows() if r.op == "convolution"]
    assert conv and "not quantized" in conv[0].note


@pytest.mark.clause("TRC-SHD-001")
def test_shadow_measures_normalisation_backwards_with_each_layers_own_eps() -> None:
    """Inputs: x (4, 8) of variance about 0.01 through LayerNorm(eps=0.5), then
    LayerNorm(eps=1e-5), then GroupNorm(2, 8, eps=0.25), times fixed random weights,
    summed, backward, under shadow(fallback='error'). Expected: every op measured
    (the backwards of the normalisations too: their handlers read the eps the forward
    saved, which must follow torch's outputs and the copies ampref computes on), and
    each backward within 1e-4 relative of torch's (an eps mixed up between the layers
    moves the gradients by far more). Pass: no error; the three backward rows emulated
    with max_rel < 1e-4."""
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(4, 8, generator=g) * 0.1).requires_grad_()
    mix = torch.randn(4, 8, generator=g)
    layers = [torch.nn.LayerNorm(8, eps=0.5), torch.nn.LayerNorm(8, eps=1e-5),
              torch.nn.GroupNorm(2, 8, eps=0.25)]
    with at.shadow(fallback="error") as sh:
        y = layers[1](layers[0](x))
        (layers[2](y.unsqueeze(-1)).squeeze(-1) * mix).sum().backward()
    rows = {(r.op, r.module): r for r in sh.report.rows()}
    backs = [r for (op, _), r in rows.items() if op.endswith("norm_backward")]
    assert len(backs) >= 2 and all(r.emulated for r in backs), rows.keys()
    for r in backs:
        assert r.max_rel < 1e-4, (r.op, r.max_rel, r.first)


#: the outputs of each op that are statistics for torch's backward, not results, pinned
#: to torch's aten schemas (native_functions.yaml): the norms return (out, mean, rstd) or
#: (out, save_mean, save_invstd); the CPU flash attention returns (output, logsumexp)
_SAVED_BY_SCHEMA: dict[str, tuple[Any, set[int]]] = {
    "native_layer_norm": (lambda x: torch.ops.aten.native_layer_norm(
        x, [8], None, None, 1e-5), {1, 2}),
    "native_batch_norm": (lambda x: torch.ops.aten.native_batch_norm(
        x, None, None, None, None, True, 0.1, 1e-5), {1, 2}),
    "native_group_norm": (lambda x: torch.ops.aten.native_group_norm(
        x, None, None, 4, 8, 1, 2, 1e-5), {1, 2}),
    "_scaled_dot_product_flash_attention_for_cpu": (
        lambda x: torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            x.reshape(1, 1, 4, 8), x.reshape(1, 1, 4, 8), x.reshape(1, 1, 4, 8)), {1}),
}


@pytest.mark.clause("TRC-SHD-004")
@pytest.mark.parametrize("op", sorted(_SAVED_BY_SCHEMA))
def test_every_op_with_saved_statistics_measures_exactly_those_outputs_apart(op: str) -> None:
    """Input: torch's own outputs of ``op`` on a (4, 8) float32 tensor, and a copy where
    one output at a time has one element moved by one ulp. Expected: an output the aten
    schema names a saved statistic (mean, rstd, save_invstd, logsumexp) gives no mismatch
    and a relative error in saved_max_rel; a result output gives one mismatch of one ulp.
    Pass: that, for every output of every op with saved statistics."""
    make, saved = _SAVED_BY_SCHEMA[op]
    x = torch.from_numpy(np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32))
    theirs = tuple(make(x))
    for i in range(len(theirs)):
        ours = [t.clone() for t in theirs]
        flat = ours[i].reshape(-1)
        flat[0] = float(np.nextafter(np.float32(flat[0]), np.float32(np.inf)))
        rec = OpRecord(module="m", op=op)
        compare(rec, op, (x,), theirs, tuple(ours))
        got = ("saved" if (rec.mismatches, rec.saved_max_rel > 0) == (0, True) else
               "result" if (rec.mismatches, rec.max_ulps) == (1, 1) else "neither")
        assert got == ("saved" if i in saved else "result"), (op, i, rec)
