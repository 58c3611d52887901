"""``ampref.optim.lr_scheduler`` against ``torch.optim.lr_scheduler`` itself (ENG-OPT-008):
every scheduler, rate by rate, bit for bit, across the branches of its recursive formula,
and resumed from its state dict mid-schedule."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from ampref import nn, optim

torch = pytest.importorskip("torch")

#: (name, keyword arguments, epochs): each long enough to reach every branch of its
#: formula (StepLR's boundaries, LinearLR past total_iters, cosine past 2 T_max, where
#: torch's recursion takes its restart branch)
CASES: list[tuple[str, dict[str, Any], int]] = [
    ("StepLR", {"step_size": 3, "gamma": 0.5}, 12),
    ("StepLR", {"step_size": 1, "gamma": 0.9}, 8),
    ("ExponentialLR", {"gamma": 0.93}, 20),
    ("LinearLR", {}, 9),  # torch's defaults: 1/3 -> 1 in 5 epochs
    ("LinearLR", {"start_factor": 1.0, "end_factor": 0.1, "total_iters": 7}, 12),
    ("LinearLR", {"start_factor": 0.25, "end_factor": 0.75, "total_iters": 1}, 4),
    ("CosineAnnealingLR", {"T_max": 5}, 23),
    ("CosineAnnealingLR", {"T_max": 4, "eta_min": 1e-4}, 19),
    ("LambdaLR", {"lr_lambda": lambda e: 0.95 ** e + 1 / (e + 3)}, 10),
]


def _rates(make: Callable[[Any], Any], new_opt: Callable[[], Any], epochs: int,
           resume_at: int | None = None) -> list[float]:
    opt = new_opt()
    sched = make(opt)
    rates = [sched.get_last_lr()[0]]
    for e in range(0, epochs):
        if e:
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr()[0])
        if e == resume_at:  # torch's resume order: build both, then load both state dicts
            sd_opt, sd = opt.state_dict(), sched.state_dict()
            opt = new_opt()
            sched = make(opt)
            opt.load_state_dict(sd_opt)
            sched.load_state_dict(sd)
    return rates


def _ampref_opt() -> Any:
    return optim.SGD([nn.Parameter(np.zeros(2, np.float32))], lr=0.1)


def _torch_opt() -> Any:
    return torch.optim.SGD([torch.nn.Parameter(torch.zeros(2))], lr=0.1)


def _hex(rates: list[float]) -> list[str]:
    return [float(r).hex() for r in rates]


@pytest.mark.clause("ENG-OPT-008")
@pytest.mark.parametrize("name,kwargs,epochs", CASES,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_every_scheduler_gives_torchs_rates_bit_for_bit(name: str, kwargs: dict[str, Any],
                                                        epochs: int) -> None:
    """Inputs: SGD at lr 0.1 under each scheduler of CASES for its epochs, in ampref and in
    torch (the oracle). Expected: the same rate every epoch, as float64 bit patterns
    (both compute torch's recursive formulas in Python floats). Pass: the hex lists
    equal."""
    ours = _rates(lambda o: getattr(optim.lr_scheduler, name)(o, **kwargs), _ampref_opt,
                  epochs)
    theirs = _rates(lambda o: getattr(torch.optim.lr_scheduler, name)(o, **kwargs),
                    _torch_opt, epochs)
    assert _hex(ours) == _hex(theirs)


@pytest.mark.clause("ENG-OPT-008")
@pytest.mark.parametrize("at", ["epoch 0", "halfway"])
@pytest.mark.parametrize("name,kwargs,epochs", CASES,
                         ids=[f"{n}-{i}" for i, (n, _, _) in enumerate(CASES)])
def test_a_schedule_resumed_from_its_state_dicts_continues_unchanged(
        name: str, kwargs: dict[str, Any], epochs: int, at: str) -> None:
    """Inputs: each case of CASES run with the optimizer and scheduler rebuilt right after
    construction (epoch 0) or halfway, and their state dicts loaded in torch's order
    (build both, load the optimizer's, then the scheduler's), in ampref and in torch.
    Expected: ampref's resumed rates equal its straight rates and torch's resumed rates,
    every epoch. Pass: the hex lists equal."""
    half = 0 if at == "epoch 0" else epochs // 2
    straight = _rates(lambda o: getattr(optim.lr_scheduler, name)(o, **kwargs), _ampref_opt,
                      epochs)
    resumed = _rates(lambda o: getattr(optim.lr_scheduler, name)(o, **kwargs), _ampref_opt,
                     epochs, resume_at=half)
    theirs = _rates(lambda o: getattr(torch.optim.lr_scheduler, name)(o, **kwargs),
                    _torch_opt, epochs, resume_at=half)
    assert _hex(resumed) == _hex(straight)
    assert _hex(resumed) == _hex(theirs)
