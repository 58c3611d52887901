"""``ampref.nn``: modules (torch.nn's names and call shapes) and ``nn.utils``."""

from __future__ import annotations

from . import utils
from .modules import (
    GELU,
    MLP,
    Conv2d,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    Module,
    MultiheadAttention,
    Parameter,
    ReLU,
    RMSNorm,
    Sequential,
    Tanh,
    TransformerBlock,
)

__all__ = [
    "GELU",
    "MLP",
    "Conv2d",
    "Dropout",
    "Embedding",
    "LayerNorm",
    "Linear",
    "Module",
    "MultiheadAttention",
    "Parameter",
    "RMSNorm",
    "ReLU",
    "Sequential",
    "Tanh",
    "TransformerBlock",
    "utils",
]
