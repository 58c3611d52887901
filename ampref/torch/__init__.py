"""PyTorch models on ampref's reference: ``emulate`` computes every floating aten op of an
unmodified torch model (forward and backward) with ampref's numerics, ``shadow`` lets
torch compute and checks every op against ampref, ``autocast`` applies ampref's autocast
policies (torch's CUDA lists on CPU tensors, jmp strings, user TOML). Spec:
``specs/torch.md``. Needs torch (the ``torch`` extra).

Imports: torch, and every ampref room up to the engine (the ops are the engine's); not
``training`` or ``certify``.
"""

from __future__ import annotations

from .autocast import autocast
from .base import UnsupportedOpError, supported_ops
from .passthrough import EXACT
from .modes import emulate
from .outsidecasts import OpCast, UnknownCastRuleError, register_autocast
from .shadowing import shadow
from .report import OpRecord, Report

__all__ = ["EXACT", "OpCast", "OpRecord", "Report", "UnknownCastRuleError",
           "UnsupportedOpError", "autocast", "emulate", "register_autocast", "shadow",
           "supported_ops"]
