"""What a report measures for one op call (``specs/torch.md`` TRC-SHD-001..004):
inf/NaN made from finite inputs (hazards) apart from the ones the call asked for (masks),
and, in shadow, the distance between torch's result and ampref's: differing elements,
ulps of the output format, relative error and the worst element, with outputs that are
saved statistics (layer norm's mean and rstd, attention's logsumexp) measured by
relative error only, since ulps near zero say nothing.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from ampref.formats.ordinal import ordinal

from .convert import FLOAT_DTYPES, format_of, is_float, to_numpy
from .report import OpRecord

__all__ = ["DEFINITION_NOTES", "SAVED_OUTPUTS", "all_finite", "compare", "count_nonfinite"]

#: ops whose trailing outputs are statistics saved for torch's own backward, not
#: results: output index -> what it is
SAVED_OUTPUTS: dict[str, dict[int, str]] = {
    "native_layer_norm": {1: "mean", 2: "rstd"},
    "native_batch_norm": {1: "saved mean", 2: "saved inverse std"},
    "native_group_norm": {1: "mean", 2: "rstd"},
    "_scaled_dot_product_flash_attention_for_cpu": {1: "logsumexp"},
}

#: ops where ampref's specification and torch's CPU kernel define different roundings on
#: purpose; a shadow row of these carries the note and the clause instead of reading as
#: a defect of either
DEFINITION_NOTES: dict[str, str] = {
    "sqrt": "TRC-PWO-001: ampref rounds sqrt correctly (float64, then once); torch's CPU "
            "kernel for reduced-precision and vectorised paths need not",
    "rsqrt": "TRC-PWO-001: ampref rounds 1/sqrt(x) once (float64, then once); torch's CPU "
             "kernel divides by a float32 square root (two roundings)",
    "mkldnn_rnn_layer": "TRC-RNN-001: ampref's LSTM rounds each op in the input format; "
                        "oneDNN keeps the gates in float32",
    "mkldnn_rnn_layer_backward": "TRC-RNN-001: the replayed reference cell's gradients",
    "native_batch_norm": "TRC-EQV-004: in bf16/fp16 x-hat is rounded before the affine",
}
for _name in ("sqrt_", "_foreach_sqrt", "_foreach_sqrt_"):
    DEFINITION_NOTES[_name] = DEFINITION_NOTES["sqrt"]
DEFINITION_NOTES["rsqrt_"] = DEFINITION_NOTES["rsqrt"]

#: logarithms: -inf from an exact zero of a constant tensor is how masks are built
#: (``log(tril(ones))``)
_LOGS = frozenset({"log", "log2", "log10"})


def _outputs(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (list, tuple)) else [out]


#: 16-bit floats: the exponent field, all ones for inf and NaN
_EXP16 = {torch.float16: 0x7C00, torch.bfloat16: 0x7F80}


def all_finite(t: torch.Tensor) -> bool:
    """No inf or NaN in floating ``t``: on the CPU through NumPy (a view of the same
    memory; 3 to 10 times cheaper than torch's isfinite for the small tensors of a
    training step), 16-bit formats by their exponent bits."""
    if t.device.type != "cpu":
        return bool(torch.isfinite(t).all())
    if t.dtype in (torch.float32, torch.float64):
        return bool(np.isfinite(t.detach().numpy()).all())
    if t.dtype in _EXP16:
        mask = _EXP16[t.dtype]
        return bool(((t.detach().view(torch.int16).numpy() & mask) != mask).all())
    return bool(torch.isfinite(t).all())


def _finite(t: Any) -> bool:
    return not (is_float(t) and t.dtype in FLOAT_DTYPES) or all_finite(t)


def _requested(name: str, args: tuple[Any, ...]) -> bool:
    """The call asked for non-finite values: a non-finite scalar argument (masked_fill
    with -inf, full, fill_), or a logarithm of a constant tensor (no gradient: a mask
    being built, not an activation underflowing)."""
    for a in args[1:]:
        v = a.item() if isinstance(a, torch.Tensor) and a.dim() == 0 and \
            a.dtype.is_floating_point else a
        if isinstance(v, float) and not math.isfinite(v):
            return True
    first = args[0] if args else None
    return name in _LOGS and isinstance(first, torch.Tensor) and not first.requires_grad \
        and first.grad_fn is None


def count_nonfinite(rec: OpRecord, name: str, args: tuple[Any, ...], out: Any) -> None:
    """Add the call's inf/NaN outputs to the record: to ``nonfinite_from_finite`` (a
    hazard) when every floating input was finite and the call did not ask for them, to
    ``intended_nonfinite`` (a mask) when it did."""
    outs = [o for o in _outputs(out) if is_float(o)]
    if all(all_finite(o) for o in outs):
        return  # the usual case: one pass per output
    flat = [a for x in args for a in (x if isinstance(x, (list, tuple)) else [x])]
    if not all(_finite(a) for a in flat):
        return  # propagated, not made here
    bad = sum(int((~torch.isfinite(o)).sum()) for o in outs)
    if _requested(name, args):
        rec.intended_nonfinite += bad
    else:
        rec.nonfinite_from_finite += bad


def _hex(v: Any) -> str:
    arr = np.asarray(v)
    bits = arr.view(np.uint32 if arr.dtype == np.float32 else np.uint64)
    return f"{int(bits):#x} ({float(arr)!r})"


def _ordinal(x: Any, dtype: torch.dtype) -> Any:
    """Positions on the output dtype's number line: float32 and float64 words directly
    (float64 has no codes in ampref's format table: measuring it raised ValueError),
    narrower formats by their codes."""
    if dtype in (torch.float32, torch.float64):
        return ordinal(x)
    return ordinal(x, format_of(dtype))


def _pairs(theirs: Any, ours: Any) -> list[tuple[int, torch.Tensor, torch.Tensor]]:
    return [(i, a, b) for i, (a, b) in enumerate(zip(_outputs(theirs), _outputs(ours),
                                                      strict=False))
            if is_float(a) and is_float(b) and a.shape == b.shape and a.dtype in FLOAT_DTYPES]


def compare(rec: OpRecord, name: str, inputs: tuple[Any, ...], theirs: Any, ours: Any) -> None:
    """Shadow's measures of one call: differing elements, max ulps, max relative error
    and the worst element of the result outputs; max relative error of saved statistics."""
    saved = SAVED_OUTPUTS.get(name, {})
    for i, a, b in _pairs(theirs, ours):
        x, y = to_numpy(a).reshape(-1), to_numpy(b).reshape(-1)
        diff = (x.view(np.uint32 if x.dtype == np.float32 else np.uint64)
                != y.view(np.uint32 if y.dtype == np.float32 else np.uint64))
        diff &= ~(np.isnan(x) & np.isnan(y))
        if not diff.any():
            continue
        fin = np.isfinite(x) & np.isfinite(y)
        with np.errstate(all="ignore"):
            rel = np.where(fin & diff, np.abs(x.astype(np.float64) - y) /
                           np.maximum(np.abs(y.astype(np.float64)), np.finfo(np.float64).tiny),
                           0.0)
        if i in saved:
            rec.saved_max_rel = max(rec.saved_max_rel, float(rel.max()))
            continue
        rec.mismatches += int(diff.sum())
        ulps = np.zeros(x.shape, np.int64)
        ulps[fin & diff] = np.abs(_ordinal(x[fin & diff], a.dtype)
                                  - _ordinal(y[fin & diff], a.dtype))
        ulps[diff & ~fin] = 2**31
        worst = int(np.argmax(ulps))
        rec.max_rel = max(rec.max_rel, float(rel.max()))
        if int(ulps[worst]) > rec.max_ulps or not rec.first:
            rec.max_ulps = max(rec.max_ulps, int(ulps[worst]))
            rec.first = {"index": worst, "output": i, "dtype": str(a.dtype),
                         "torch": _hex(x[worst]), "ampref": _hex(y[worst]),
                         "ulps": int(ulps[worst]), "relative": float(rel[worst]),
                         "inputs": [_hex(to_numpy(t).reshape(-1)[worst]) for t in inputs
                                    if is_float(t) and t.shape == a.shape]}
