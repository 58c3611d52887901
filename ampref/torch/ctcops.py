"""aten's CTC loss (``F.ctc_loss``, ``nn.CTCLoss``) on ampref's numerics
(``specs/torch.md`` TRC-NN-011): ``_ctc_loss`` and ``_ctc_loss_backward``.

torch's algorithm (Graves et al. 2006, as torch's CPU kernel writes it) evaluated in
float64 and rounded once to the log-probabilities' dtype:

* forward: the log-space alpha recursion over the extended labels ``l'`` (blank,
  l1, blank, l2, ..., blank), ``alpha_t(s) = log(sum of exp(alpha_{t-1}(s - j) - m)
  over j = 0, 1, and 2 where s is a label differing from l'_{s-2}) + m + lp_t(l'_s)``
  with ``m`` their maximum (0 when all are ``-inf``); the negative log-likelihood is
  ``-logaddexp`` of the last two alphas at the input's length. A target no alignment
  can produce (too long for its input) gives ``+inf``.
* the ``log_alpha`` output holds those float64 alphas rounded to float32, ``-inf`` past
  each input's length and target's extended length (torch leaves that memory unset).
* backward: the beta recursion likewise from the end, and for ``t`` below the input's
  length ``grad_t(c) = (exp(lp_t(c)) - exp(log sum_{s: l'_s = c} alpha_t(s) beta_t(s)
  + nll - lp_t(c))) g`` (torch's formula), 0 from the input's length on, and all 0 for
  an infinite loss with ``zero_infinity``. The backward recomputes the alphas in
  float64 rather than reading the rounded ``log_alpha``.

Within float64 (relative error about ``T`` float64 ulps per value), so the float32
results are the exactly rounded ones except that close to a rounding boundary.
Targets are padded 2-D ``(N, S)`` or concatenated 1-D, as torch accepts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .convert import from_numpy, to_numpy

__all__ = ["CTC"]

Handler = Callable[[Any, Any, tuple[Any, ...], dict[str, Any]], Any]

_NEG = -np.inf


def _ints(v: Any) -> list[int]:
    return [int(x) for x in (to_numpy(v).reshape(-1) if hasattr(v, "shape") else v)]


def _labels(targets: Any, lengths: list[int]) -> list[np.ndarray]:
    """Each sample's target labels (padded 2-D rows or consecutive 1-D runs)."""
    t = to_numpy(targets)
    if t.ndim == 2:
        return [t[i, :n].astype(np.int64) for i, n in enumerate(lengths)]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(int)
    return [t[s:s + n].astype(np.int64) for s, n in zip(starts, lengths, strict=True)]


def _extended(label: np.ndarray, blank: int) -> tuple[np.ndarray, np.ndarray]:
    """l' (blank between and around the labels) and where a skip from s - 2 is allowed."""
    ext = np.full(2 * label.size + 1, blank, np.int64)
    ext[1::2] = label
    skip = np.zeros(ext.size, bool)
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    return ext, skip


def _logsum3(a: Any, b: Any, c: Any) -> Any:
    """torch's log(exp(a - m) + exp(b - m) + exp(c - m)) + m, m = 0 if all are -inf."""
    m = np.maximum(np.maximum(a, b), c)
    m = np.where(m == _NEG, 0.0, m)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - m) + np.exp(b - m) + np.exp(c - m)) + m


def _alphas(lp: np.ndarray, ext: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """(T, S') float64 log-alphas of one sample over its input length."""
    T, S = lp.shape[0], ext.size
    la = np.full((T, S), _NEG)
    la[0, 0] = lp[0, ext[0]]
    if S > 1:
        la[0, 1] = lp[0, ext[1]]
    for t in range(1, T):
        prev = la[t - 1]
        one = np.concatenate([[_NEG], prev[:-1]])
        two = np.where(skip, np.concatenate([[_NEG, _NEG], prev[:-2]]), _NEG)
        la[t] = _logsum3(prev, one, two) + lp[t, ext]
    return la


def _betas(lp: np.ndarray, ext: np.ndarray, skip: np.ndarray) -> np.ndarray:
    """(T, S') float64 log-betas (torch's, which include lp_t(l'_s))."""
    T, S = lp.shape[0], ext.size
    lb = np.full((T, S), _NEG)
    lb[T - 1, S - 1] = lp[T - 1, ext[S - 1]]
    if S > 1:
        lb[T - 1, S - 2] = lp[T - 1, ext[S - 2]]
    ahead = np.concatenate([skip[2:], [False, False]])  # s + 2 may be reached from s
    for t in range(T - 2, -1, -1):
        nxt = lb[t + 1]
        one = np.concatenate([nxt[1:], [_NEG]])
        two = np.where(ahead, np.concatenate([nxt[2:], [_NEG, _NEG]]), _NEG)
        lb[t] = _logsum3(nxt, one, two) + lp[t, ext]
    return lb


def _nll(la: np.ndarray, label_count: int) -> float:
    if la.shape[0] == 0:
        return 0.0 if label_count == 0 else np.inf
    end = la[-1]
    l1 = end[-1]
    l2 = end[-2] if label_count > 0 else _NEG
    m = max(l1, l2)
    m = 0.0 if m == _NEG else m
    with np.errstate(divide="ignore"):
        return float(-(np.log(np.exp(l1 - m) + np.exp(l2 - m)) + m))


def _check_lengths(name: str, values: list[int], count: int, most: int) -> None:
    """One length per sample, each in [0, most] (torch's kernel checks the input lengths;
    a wrong target length or count would read past the targets)."""
    if len(values) != count:
        raise ValueError(f"ctc_loss: {name} has {len(values)} entries for a batch of "
                         f"{count}; expected one per sample")
    bad = [x for x in values if not 0 <= x <= most]
    if bad:
        raise ValueError(f"ctc_loss: {name} value {bad[0]} is outside [0, {most}]")


def _check_labels(labels: list[np.ndarray], classes: int, blank: int) -> None:
    """Every label a class index: torch's CPU kernel reads out of bounds silently."""
    if not 0 <= blank < classes:
        raise ValueError(f"ctc_loss: blank {blank} is not a class index; allowed: "
                         f"0..{classes - 1} ({classes} classes)")
    for n, lab in enumerate(labels):
        bad = lab[(lab < 0) | (lab >= classes)]
        if bad.size:
            raise ValueError(f"ctc_loss: target label {int(bad[0])} of sample {n} is not a "
                             f"class index; allowed: 0..{classes - 1} ({classes} classes)")


def _samples(args: tuple[Any, ...], kw: dict[str, Any],
             first: int) -> tuple[np.ndarray, list[Any], list[int], int]:
    """log-probs (T, N, C) float64, per-sample (ext, skip), input lengths, blank;
    a length or label outside its range is a ValueError naming it."""
    lp, targets, in_len, tg_len = args[first:first + 4]
    blank = int(args[first + 4] if len(args) > first + 4 else kw.get("blank", 0))
    lengths, tls = _ints(in_len), _ints(tg_len)
    v = to_numpy(lp).astype(np.float64)
    if v.ndim == 2:
        v = v[:, None, :]
    t = to_numpy(targets)
    _check_lengths("input_lengths", lengths, v.shape[1], v.shape[0])
    _check_lengths("target_lengths", tls, v.shape[1],
                   t.shape[1] if t.ndim == 2 else t.size)
    if t.ndim != 2 and sum(tls) > t.size:
        raise ValueError(f"ctc_loss: target_lengths sum to {sum(tls)} but the "
                         f"concatenated targets hold {t.size} labels")
    labels = _labels(targets, tls)
    _check_labels(labels, v.shape[2], blank)
    return v, [_extended(lab, blank) for lab in labels], lengths, blank


def _ctc(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    """torch's outputs (no meta kernel exists): nll (N,), log_alpha (N, T, 2 S + 1)
    with S the longest target length (padded targets wider than it included, as torch's
    CPU kernel), in lp's dtype."""
    lp = args[0]
    v, exts, lengths, _ = _samples(args, kw, 0)
    width = max(_ints(args[3]), default=0)
    nll = np.empty(len(exts))
    alpha = np.full((len(exts), v.shape[0], 2 * width + 1), _NEG)
    for n, (ext, skip) in enumerate(exts):
        la = _alphas(v[:lengths[n], n], ext, skip) if lengths[n] else np.full((0, ext.size),
                                                                              _NEG)
        nll[n] = _nll(la, ext.size // 2)
        alpha[n, :la.shape[0], :la.shape[1]] = la
    return (from_numpy(nll.astype(np.float32), lp.dtype),
            from_numpy(alpha.astype(np.float32), lp.dtype))


def _ctc_bwd(ctx: Any, func: Any, args: tuple[Any, ...], kw: dict[str, Any]) -> Any:
    g, lp = args[0], args[1]
    zero_inf = bool(args[8] if len(args) > 8 else kw.get("zero_infinity", False))
    v, exts, lengths, _ = _samples((args[1], args[2], args[3], args[4], args[7]), kw, 0)
    gv = to_numpy(g).astype(np.float64).reshape(-1)
    grad = np.zeros(v.shape)
    for n, (ext, skip) in enumerate(exts):
        T = lengths[n]
        if T == 0:
            continue
        x = v[:T, n]
        la, lb = _alphas(x, ext, skip), _betas(x, ext, skip)
        nll = _nll(la, ext.size // 2)
        if zero_inf and nll == np.inf:
            continue
        ab = la + lb
        lcab = np.full(x.shape, _NEG)
        for c in np.unique(ext):
            cols = ab[:, ext == c]
            m = cols.max(axis=1)
            safe = np.where(m == _NEG, 0.0, m)
            with np.errstate(divide="ignore"):
                lcab[:, c] = np.log(np.exp(cols - safe[:, None]).sum(axis=1)) + safe
        with np.errstate(over="ignore", invalid="ignore"):
            grad[:T, n] = (np.exp(x) - np.exp(lcab + nll - x)) * gv[n if gv.size > 1 else 0]
    return from_numpy(grad.reshape(tuple(lp.shape)).astype(np.float32), lp.dtype)


#: aten op name (overload packet) -> handler
CTC: dict[str, Handler] = {"_ctc_loss": _ctc, "_ctc_loss_backward": _ctc_bwd}
