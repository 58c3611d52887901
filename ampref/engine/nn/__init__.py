"""``ampref.nn``: modules (torch.nn's names and call shapes), ``nn.init`` and
``nn.utils``: layers with parameters (``modules``), parameter-free layers and losses
(``stateless``), containers (``containers``), initialisers (``init``)."""

from __future__ import annotations

from . import containers, init, modules, stateless, utils
from .containers import *  # noqa: F403 - each module's layers are this package's public names
from .modules import *  # noqa: F403
from .stateless import *  # noqa: F403

__all__ = [*modules.__all__, *stateless.__all__, *containers.__all__, "init", "utils"]
