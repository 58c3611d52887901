"""``ampref.optim``: optimizers on float32 master weights (``optimizers``), torch's
``param_groups`` view (``groups``) and learning-rate schedulers (``lr_scheduler``), with
torch.optim's names and call shapes."""

from __future__ import annotations

from . import lr_scheduler
from .groups import ParamGroup
from .optimizers import SGD, Adam, AdamW, Optimizer

__all__ = ["SGD", "Adam", "AdamW", "Optimizer", "ParamGroup", "lr_scheduler"]
