"""torch's ``param_groups`` over ampref's single-group optimizers (ENG-OPT-007).

``optimizer.param_groups`` is a list with one mapping. ``"params"`` is the parameter
list; ``"lr"`` reads and writes the optimizer's learning rate (checked as the constructor
checks it), which is what learning-rate schedulers and hand-written warm-ups do;
``"initial_lr"`` (set by torch-style schedulers) is kept on the optimizer. The other
hyperparameters (``momentum``, ``betas``, ``eps``, ``weight_decay``, ...) read their
values; changing them after construction is refused with the reason, since a
mid-run change would have to be part of the optimizer's state dict.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, MutableMapping
from typing import Any

__all__ = ["HYPERPARAMETERS", "ParamGroup", "check_lr"]

#: optimizer attributes shown as keys of the group, when the optimizer has them
HYPERPARAMETERS = ("momentum", "dampening", "weight_decay", "nesterov", "betas", "eps")


def check_lr(lr: Any) -> float:
    """A learning rate: a finite real number >= 0 (bools refused).

    Raises:
        ValueError: anything else (the value named).
    """
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) \
            or lr < 0:
        raise ValueError(f"learning rate must be a finite number >= 0, got {lr!r}")
    return float(lr)


class ParamGroup(MutableMapping[str, Any]):
    """A live view of one optimizer's hyperparameters with torch's keys."""

    def __init__(self, optimizer: Any) -> None:
        self._opt = optimizer

    def _keys(self) -> list[str]:
        keys = ["params", "lr", *(k for k in HYPERPARAMETERS if hasattr(self._opt, k))]
        return keys + (["initial_lr"] if hasattr(self._opt, "initial_lr") else [])

    def __getitem__(self, key: str) -> Any:
        if key == "params":
            return list(self._opt.params)
        if key in self._keys():
            return getattr(self._opt, key)
        raise KeyError(key)

    def __setitem__(self, key: str, value: Any) -> None:
        if key == "lr":
            self._opt.lr = check_lr(value)
        elif key == "initial_lr":
            self._opt.initial_lr = check_lr(value)
        elif key in self._keys():
            raise ValueError(f"param_groups[0][{key!r}] is fixed at construction in ampref "
                             "(only 'lr' changes during a run); build a new optimizer")
        else:
            raise KeyError(f"{key!r} is not a hyperparameter of {type(self._opt).__name__} "
                           f"(keys: {', '.join(self._keys())})")

    def __delitem__(self, key: str) -> None:
        raise ValueError(f"param_groups keys cannot be deleted (got {key!r})")

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())
