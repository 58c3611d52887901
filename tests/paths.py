"""Folders the tests read: the repository root and the recorded test data."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: the repository checkout (specs/, docs/, scripts/ beside tests/)
ROOT = Path(__file__).resolve().parents[1]
#: recorded vectors and traces, each with the script in scripts/ that regenerates it
DATA = ROOT / "tests" / "data"


def script(name: str) -> ModuleType:
    """``scripts/<name>.py`` loaded as a module (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is made
    spec.loader.exec_module(mod)
    return mod
