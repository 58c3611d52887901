"""``shadow``: torch computes, ampref checks every op (``specs/torch.md`` TRC-SHD-*).

torch's results are what the model uses (the implementation under test); ampref
recomputes each op it covers on copies of the same inputs and the report records where
the two differ (:mod:`ampref.torch.measures`).
"""

from __future__ import annotations

from typing import Any

import torch

from ampref.policy.autocast import suspended

from .base import ModeBase, UnsupportedOpError, elements, unsupported_reason
from .composites import routed
from .measures import DEFINITION_NOTES, compare, count_nonfinite
from .outargs import functional_form, store

__all__ = ["shadow"]


def _clone(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.detach().clone()
    if isinstance(a, (list, tuple)):
        return type(a)(_clone(x) for x in a)
    return a


class shadow(ModeBase):  # noqa: N801 - a context manager
    """Let torch compute and check every op against ampref: ``with
    ampref.torch.shadow(model) as s: ...; print(s.report.table())``.

    torch's results are what the model uses; ampref recomputes each op it has a
    reference for on copies of the same inputs. The report gives per module and op the
    calls, elements, differing elements, the largest distance in ulps of the output
    format and the largest relative error, the worst element (index, values and the
    elementwise inputs in hex), inf/NaN made from finite inputs apart from requested ones
    (masks), saved statistics by relative error, and a note where the two define
    different roundings on purpose. ``fallback`` as in :class:`~ampref.torch.emulate`:
    ``"torch"`` (the default here) records an op without a reference and goes on,
    ``"error"`` raises :class:`~ampref.torch.UnsupportedOpError` naming it.

    Raises:
        ValueError: unknown accumulation model or fallback (choices named).
        TypeError: a model that is not an ``nn.Module``.
    """

    kind = "shadow"

    def __init__(self, model: torch.nn.Module | None = None, *, accumulation: str = "exact",
                 fallback: str = "torch") -> None:
        super().__init__(model, accumulation=accumulation)
        if not isinstance(fallback, str) or fallback not in ("error", "torch"):
            raise ValueError(f"fallback must be 'error' or 'torch', got {fallback!r}")
        self.fallback = fallback

    def __enter__(self) -> shadow:
        super().__enter__()
        return self

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        name = func.overloadpacket.__name__
        handler, inplace, answer = routed(self, func, args, kwargs)
        if answer is not NotImplemented:
            return answer
        copies, kw_copies = _clone(args), _clone(kwargs)
        theirs = func(*args, **kwargs)
        rec = self.report.record(self.path(), name)
        rec.calls += 1
        rec.elements += elements(theirs)
        count_nonfinite(rec, name, copies, theirs)
        try:
            if handler is None:
                raise UnsupportedOpError(unsupported_reason(name, args, kwargs))
            call, kw, targets = functional_form(func, copies, kw_copies, inplace)
            self.adopt_saved(args, copies)
            with suspended():
                ours = handler(self, call, copies, kw)
            self.adopt_saved(ours, theirs)
            seen = theirs
            if inplace is not None:  # torch wrote into self: compare in self's dtype
                written = _clone(targets)
                store(func, written, ours)
                ours, seen = written, args[0]
        except NotImplementedError as e:
            if self.fallback != "torch":
                raise UnsupportedOpError(
                    f"ampref.torch.shadow: {e} (aten op {func}, module {rec.module}); pass "
                    "fallback='torch' to record it and go on") from None
            rec.emulated, rec.note = False, str(e)
            return theirs
        compare(rec, name, copies, seen, ours)
        if rec.mismatches and name in DEFINITION_NOTES:
            rec.note = DEFINITION_NOTES[name]
        return theirs
