"""``ampref.nn``: modules (torch.nn's names and call shapes) and ``nn.utils``."""

from __future__ import annotations

from . import modules, utils
from .modules import *  # noqa: F403 - the layers of .modules are this package's public names

__all__ = [*modules.__all__, "utils"]
