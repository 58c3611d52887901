"""NVIDIA tensor-core parameters per GPU, and the model's switchable rules, as data.

A GPU is a :class:`TensorCoreGPU` row: per input family a :class:`Path` (block size,
kept fraction bits, output rounding) and the minimum alignment exponents L. Where two
published models disagree and no hardware rows decide (specs/accumulation.md
ACC-TC-008), the rule is a field of :class:`Rules`: :data:`AMPREF_RULES` (the default)
or :data:`MMASIM_RULES` (MMA-Sim's conventions, Xie et al. 2025), or any mix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from ampref.formats.table import Encoding, Format, get_format

__all__ = ["Path", "TensorCoreGPU", "Rules", "AMPREF_RULES", "MMASIM_RULES", "get_rules",
           "GPUS", "FAMILY", "get_gpu", "block_params", "ACC_E8M13"]

#: fp32 container with a 14-bit significand: the FP8 accumulator of Ada/Hopper
ACC_E8M13 = Format(name="e8m13", exponent_bits=8, mantissa_bits=13, bias=127,
                   encoding=Encoding.IEEE)


@dataclass(frozen=True, kw_only=True)
class Path:
    """Parameters of one input-format family on one GPU."""

    #: products per block (one hardware instruction's k extent)
    block: int
    #: fraction bits kept when aligning to the largest exponent (23 + neab)
    frac_bits: int
    #: significand bits of the fp32-output rounding (24, or 14 for Hopper FP8)
    out_sig_bits: int = 24
    #: rounding of the fp32 result: "toward_zero" (hardware) or "nearest_even"
    out_rounding: str = "toward_zero"
    #: if True the block sums products only, rounds that with ``out_rounding``, and
    #: adds c afterwards in one correctly rounded fp32 addition (``late_rounding``)
    late_addend: bool = False
    late_rounding: str = "nearest_even"
    #: a chain of correctly rounded FMAs (FP64 DMMA), no block alignment at all
    fma_chain: bool = False


@dataclass(frozen=True, kw_only=True)
class Rules:
    """The undecided conventions of the block-FMA model (ACC-TC-008), one field each.

    Defaults are ampref's rules; :data:`MMASIM_RULES` switches every one to MMA-Sim's.
    """

    #: exponent of a zero operand or zero c in the alignment maximum: None = zeros do not
    #: take part (ampref); -126 = a zero counts as 2^-126 (MMA-Sim)
    zero_exponent: int | None = None
    #: apply the GPU's minimum alignment exponent L (ampref) or not (MMA-Sim)
    alignment_floor: bool = True
    #: a toward-zero fp32 result beyond FLT_MAX: "saturate" to +-FLT_MAX (IEEE RZ,
    #: ampref) or "inf" (MMA-Sim)
    overflow: str = "saturate"
    #: sign of a zero result: "ieee" (the IEEE sum of the truncated terms, -0 only when
    #: all are -0; ampref) or "positive" (always +0, MMA-Sim)
    zero_sign: str = "ieee"
    #: exponent floor of an fp16 addend (fp16 output): "float32" (-126, subnormal fp16
    #: addends keep their own exponent; ampref) or "float16" (-14, MMA-Sim)
    fp16_addend_floor: str = "float32"
    #: tf32 inputs as fp32 words with the low 13 bits cleared (MMA-Sim: a NaN whose
    #: payload is only in those bits becomes +-inf) instead of tf32 values (ampref)
    tf32_words: bool = False
    #: B200 FP8: add c after the block (ACC-TC-006, decided by the B200 dumps; ampref)
    #: or inside it (MMA-Sim)
    late_addend: bool = True

    def __post_init__(self) -> None:
        if self.zero_exponent is not None and (
                isinstance(self.zero_exponent, bool) or not isinstance(self.zero_exponent, int)):
            raise TypeError(f"Rules.zero_exponent must be an int or None, got "
                            f"{self.zero_exponent!r}")
        for name, value, allowed in (("overflow", self.overflow, ("saturate", "inf")),
                                     ("zero_sign", self.zero_sign, ("ieee", "positive")),
                                     ("fp16_addend_floor", self.fp16_addend_floor,
                                      ("float32", "float16"))):
            if value not in allowed:
                raise ValueError(f"Rules.{name} = {value!r}; choose one of {allowed}")


AMPREF_RULES = Rules()
MMASIM_RULES = Rules(zero_exponent=-126, alignment_floor=False, overflow="inf",
                     zero_sign="positive", fp16_addend_floor="float16", tf32_words=True,
                     late_addend=False)
_NAMED_RULES = {"ampref": AMPREF_RULES, "mmasim": MMASIM_RULES}


def get_rules(rules: str | Rules | None) -> Rules:
    """A :class:`Rules` from itself, None (ampref's) or a name ("ampref", "mmasim").

    Raises:
        ValueError: unknown name (choices listed).
    """
    if rules is None:
        return AMPREF_RULES
    if isinstance(rules, Rules):
        return rules
    try:
        return _NAMED_RULES[str(rules).lower()]
    except KeyError:
        raise ValueError(f"unknown tensor-core rules {rules!r}; choose one of "
                         f"{', '.join(_NAMED_RULES)} or pass an "
                         "ampref.accumulation.gpus.Rules") from None


@dataclass(frozen=True, kw_only=True)
class TensorCoreGPU:
    """One GPU generation: a row of data, no code of its own."""

    name: str
    #: input family -> parameters; families: "16bit" (fp16, bf16), "tf32", "fp8" (on
    #: Blackwell kind::f8f6f4: FP8, FP6 and FP4 elements), "fp64" (DMMA)
    paths: Mapping[str, Path] = field(default_factory=dict)
    #: minimum alignment exponent L for fp32 / fp16 output (None: no limit)
    min_exp_fp32: int | None = None
    min_exp_fp16: int | None = None
    #: input formats this GPU's tensor cores take
    inputs: tuple[str, ...] = ()
    #: where the parameters come from
    source: str = ""

    def __post_init__(self) -> None:
        # a frozen row whose dict can still be edited is not frozen: keep a read-only copy
        object.__setattr__(self, "paths", MappingProxyType(dict(self.paths)))


_FP8 = ("float8_e4m3fn", "float8_e5m2")
_F6F4 = ("float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")
_DMMA = Path(block=1, frac_bits=52, fma_chain=True)


def _row(name: str, *, block16: int, frac_bits: int, block_tf32: int | None = None,
         fp8: Path | None = None, f6f4: bool = False, fp64: bool = False,
         min_exp_fp32: int | None, min_exp_fp16: int, source: str) -> TensorCoreGPU:
    """One GPU from its published parameters: the 16-bit path's block and fraction bits,
    the tf32 block (None: no tf32/bf16 path, V100), the FP8 path (with FP6/FP4 elements
    on Blackwell), FP64 DMMA, the minimum alignment exponents L for fp32/fp16 output."""
    paths = {"16bit": Path(block=block16, frac_bits=frac_bits)}
    if block_tf32 is not None:
        paths["tf32"] = Path(block=block_tf32, frac_bits=frac_bits)
    inputs: tuple[str, ...] = (("float16",) if block_tf32 is None
                               else ("float16", "bfloat16", "tf32"))
    if fp8 is not None:
        paths["fp8"] = fp8
        inputs += _FP8 + (_F6F4 if f6f4 else ())
    if fp64:
        paths["fp64"] = _DMMA
        inputs += ("float64",)
    return TensorCoreGPU(name=name, paths=paths, min_exp_fp32=min_exp_fp32,
                         min_exp_fp16=min_exp_fp16, inputs=inputs, source=source)


_KM = "Khattak & Mikaitis 2025, models/*TC.m"
_HOPPER_FP8 = Path(block=32, frac_bits=13, out_sig_bits=14)
_ADA_FP8 = Path(block=16, frac_bits=13, out_sig_bits=14)
# B200 FP8: the published parameters (block 32, 25 bits, RZ) with c inside the block
# miss ~1800 of the 5000 shipped rows per format. Adding c *after* the RZ-rounded
# product sum, with one round-to-nearest-even fp32 addition, reproduces all 10,000
# (specs/accumulation.md ACC-TC-006). kind::f8f6f4 takes FP6/FP4 elements on the same
# datapath (ACC-TC-009).
_B200_FP8 = Path(block=32, frac_bits=25, late_addend=True)

#: GPU name -> model row. Adding a GPU is adding a row.
GPUS: dict[str, TensorCoreGPU] = {g.name: g for g in (
    _row("v100", block16=4, frac_bits=23, min_exp_fp32=None, min_exp_fp16=-19,
         source=_KM + " (V100TC)"),
    _row("a100", block16=8, frac_bits=24, block_tf32=4, fp64=True, min_exp_fp32=-132,
         min_exp_fp16=-20, source=_KM + " (A100TC)"),
    _row("a2", block16=8, frac_bits=24, block_tf32=4, min_exp_fp32=-132, min_exp_fp16=-20,
         source=_KM + " (A100TC, A2 dumps)"),
    _row("ada", block16=8, frac_bits=24, block_tf32=4, fp8=_ADA_FP8, min_exp_fp32=-132,
         min_exp_fp16=-20, source=_KM + " (Ada); L assumed as A100 [unconfirmed]"),
    _row("l40s", block16=8, frac_bits=24, block_tf32=4, fp8=_ADA_FP8, min_exp_fp32=-132,
         min_exp_fp16=-20, source=_KM + " (L40S); L assumed as A100 [unconfirmed]"),
    _row("h100", block16=16, frac_bits=25, block_tf32=8, fp8=_HOPPER_FP8, fp64=True,
         min_exp_fp32=-133, min_exp_fp16=-21, source=_KM + " (H100TC)"),
    _row("h200", block16=16, frac_bits=25, block_tf32=8, fp8=_HOPPER_FP8, fp64=True,
         min_exp_fp32=-133, min_exp_fp16=-21, source=_KM + " (H100TC; same SM as H100)"),
    _row("b200", block16=16, frac_bits=25, block_tf32=8, fp8=_B200_FP8, f6f4=True, fp64=True,
         min_exp_fp32=-133, min_exp_fp16=-21,
         source=_KM + " (B200TC); FP8 row fitted here"),
)}

#: input format -> family (the key of :attr:`TensorCoreGPU.paths`)
FAMILY = {"float16": "16bit", "bfloat16": "16bit", "tf32": "tf32", "float64": "fp64",
          **{f: "fp8" for f in _FP8 + _F6F4}}


def get_gpu(name: str | TensorCoreGPU) -> TensorCoreGPU:
    """Look up a GPU model row by name (case-insensitive).

    Raises:
        ValueError: unknown GPU; the message lists the known ones.
    """
    if isinstance(name, TensorCoreGPU):
        return name
    try:
        return GPUS[str(name).lower()]
    except KeyError:
        raise ValueError(f"unknown GPU {name!r}; known: {', '.join(GPUS)}") from None


def block_params(gpu: str | TensorCoreGPU, input_format: str | Format,
                 output_format: str | Format,
                 b_format: str | Format | None = None) -> tuple[Path, int | None, Format, Format]:
    """(path, L, input format, output format) after validating the combination.

    ``b_format`` (default: ``input_format``) is B's format: the FP8 family multiplies any
    two of its formats the GPU takes (E4M3 x E5M2 everywhere, FP6/FP4 on Blackwell,
    ACC-TC-007/009); every other mix is refused. Output: float32 or float16 (not for
    tf32/bf16 inputs); float64 exactly for float64 inputs (DMMA).
    """
    g = get_gpu(gpu)
    fin, fout = get_format(input_format), get_format(output_format)
    fb = get_format(b_format or fin)
    fam = FAMILY.get(fin.name)
    if fam is None:
        raise ValueError(f"tensor cores take {', '.join(FAMILY)} inputs, got {fin.name}")
    for f in {fin.name, fb.name}:
        if f not in g.inputs:
            raise ValueError(f"{g.name} has no {f} tensor-core path; it supports "
                             f"{', '.join(g.inputs)}")
    if fb.name != fin.name and not (fam == "fp8" and FAMILY.get(fb.name) == "fp8"):
        raise ValueError(f"mixed operands {fin.name} x {fb.name}: only the FP8/FP6/FP4 "
                         f"family mixes its formats")
    allowed = ("float64",) if fam == "fp64" else (
        ("float32", "float16") if fin.name == "float16" or fam == "fp8" else ("float32",))
    if fout.name not in allowed:
        raise ValueError(f"output_format {fout.name} is not modelled for {fin.name} inputs; "
                         f"choose one of {', '.join(allowed)}")
    lim = g.min_exp_fp32 if fout.name == "float32" else g.min_exp_fp16
    return g.paths[fam], lim, fin, fout
