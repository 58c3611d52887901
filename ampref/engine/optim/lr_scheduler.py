"""Learning-rate schedulers with torch's names, call order and arithmetic (ENG-OPT-008).

Each scheduler writes ``optimizer.param_groups[0]["lr"]`` the way
``torch.optim.lr_scheduler`` does: the same recursive (chainable) formulas in Python
float64, so a schedule's learning rates equal torch's bit for bit (the optimizer rounds
the rate to float32 when it applies it, ENG-OPT-001). As in torch, building a scheduler
sets ``initial_lr`` and takes the step for epoch 0, and ``step()`` belongs after
``optimizer.step()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

__all__ = ["CosineAnnealingLR", "ExponentialLR", "LRScheduler", "LambdaLR", "LinearLR",
           "StepLR"]


def _positive_int(name: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be an int >= 1, got {v!r}")
    return v


def _number(name: str, v: Any, lo: float, hi: float = math.inf) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise ValueError(f"{name} must be a number in [{lo}, {hi}], got {v!r}")
    return float(v)


class LRScheduler:
    """Base: ``step()`` advances ``last_epoch`` and sets the new rate from ``get_lr()``."""

    def __init__(self, optimizer: Any, last_epoch: int = -1) -> None:
        if not hasattr(optimizer, "param_groups"):
            raise TypeError(f"a scheduler needs an ampref optimizer, got "
                            f"{type(optimizer).__name__}")
        if last_epoch != -1:
            raise ValueError("resuming with last_epoch is done with load_state_dict() in "
                             f"ampref, got last_epoch={last_epoch!r}")
        self.optimizer = optimizer
        group = optimizer.param_groups[0]
        group.setdefault("initial_lr", group["lr"])
        self.base_lrs: list[float] = [group["initial_lr"]]
        self.last_epoch = -1
        self._last_lr: list[float] = []
        self.step()

    def get_lr(self) -> list[float]:
        raise NotImplementedError(f"{type(self).__name__} must define get_lr()")

    def _lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def step(self) -> None:
        self.last_epoch += 1
        lr = self.get_lr()[0]
        self.optimizer.param_groups[0]["lr"] = lr
        self._last_lr = [lr]

    def get_last_lr(self) -> list[float]:
        return list(self._last_lr)

    def state_dict(self) -> dict[str, Any]:
        return {"last_epoch": self.last_epoch, "base_lrs": list(self.base_lrs),
                "last_lr": list(self._last_lr)}

    def load_state_dict(self, sd: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (checked: keys, an int epoch >= 0, one rate
        per group)."""
        keys = {"last_epoch", "base_lrs", "last_lr"}
        if not isinstance(sd, dict) or set(sd) != keys:
            raise ValueError(f"a scheduler state dict has the keys {sorted(keys)}, got "
                             f"{sorted(sd) if isinstance(sd, dict) else type(sd).__name__}")
        if isinstance(sd["last_epoch"], bool) or not isinstance(sd["last_epoch"], int) \
                or sd["last_epoch"] < 0:
            raise ValueError(f"last_epoch must be an int >= 0, got {sd['last_epoch']!r}")
        for k in ("base_lrs", "last_lr"):
            if not isinstance(sd[k], list) or len(sd[k]) != 1:
                raise ValueError(f"{k} must be a list of one rate (one group), got {sd[k]!r}")
            _number(k, sd[k][0], 0.0)
        self.last_epoch = sd["last_epoch"]
        self.base_lrs, self._last_lr = list(sd["base_lrs"]), list(sd["last_lr"])


class LambdaLR(LRScheduler):
    """lr = initial_lr * lr_lambda(epoch)."""

    def __init__(self, optimizer: Any, lr_lambda: Callable[[int], float],
                 last_epoch: int = -1) -> None:
        if not callable(lr_lambda):
            raise TypeError(f"lr_lambda must be callable, got {type(lr_lambda).__name__}")
        self.lr_lambda = lr_lambda
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self.base_lrs[0] * self.lr_lambda(self.last_epoch)]


class StepLR(LRScheduler):
    """lr *= gamma every ``step_size`` epochs."""

    def __init__(self, optimizer: Any, step_size: int, gamma: float = 0.1,
                 last_epoch: int = -1) -> None:
        self.step_size = _positive_int("step_size", step_size)
        self.gamma = _number("gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return [self._lr()]
        return [self._lr() * self.gamma]


class ExponentialLR(LRScheduler):
    """lr *= gamma every epoch."""

    def __init__(self, optimizer: Any, gamma: float, last_epoch: int = -1) -> None:
        self.gamma = _number("gamma", gamma, 0.0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        return [self._lr()] if self.last_epoch == 0 else [self._lr() * self.gamma]


class LinearLR(LRScheduler):
    """The factor goes linearly from ``start_factor`` to ``end_factor`` in
    ``total_iters`` epochs (a warm-up), by torch's recursive ratio."""

    def __init__(self, optimizer: Any, start_factor: float = 1.0 / 3, end_factor: float = 1.0,
                 total_iters: int = 5, last_epoch: int = -1) -> None:
        if isinstance(start_factor, (int, float)) and start_factor == 0:
            raise ValueError("start_factor must be in (0, 1], got 0")
        self.start_factor = _number("start_factor", start_factor, 0.0, 1.0)
        self.end_factor = _number("end_factor", end_factor, 0.0, 1.0)
        self.total_iters = _positive_int("total_iters", total_iters)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        if self.last_epoch == 0:
            return [self._lr() * self.start_factor]
        if self.last_epoch > self.total_iters:
            return [self._lr()]
        d = self.end_factor - self.start_factor
        ratio = 1.0 + d / (self.total_iters * self.start_factor + (self.last_epoch - 1) * d)
        return [self._lr() * ratio]


class CosineAnnealingLR(LRScheduler):
    """eta_min + (initial_lr - eta_min)(1 + cos(pi t / T_max)) / 2, by torch's
    recursive form (each rate from the previous one)."""

    def __init__(self, optimizer: Any, T_max: int, eta_min: float = 0.0,
                 last_epoch: int = -1) -> None:
        self.T_max = _positive_int("T_max", T_max)
        self.eta_min = _number("eta_min", eta_min, 0.0)
        super().__init__(optimizer, last_epoch)

    def get_lr(self) -> list[float]:
        t, T, lo, base = self.last_epoch, self.T_max, self.eta_min, self.base_lrs[0]
        if t == 0:
            return [self._lr()]
        if (t - 1 - T) % (2 * T) == 0:
            return [self._lr() + (base - lo) * (1 - math.cos(math.pi / T)) / 2]
        return [(1 + math.cos(math.pi * t / T)) / (1 + math.cos(math.pi * (t - 1) / T))
                * (self._lr() - lo) + lo]
