"""``ampref.cuda``: torch.cuda's availability queries, so ``device = "cuda" if
ampref.cuda.is_available() else "cpu"`` ports unchanged (ENG-DEV-001)."""

from __future__ import annotations

from .device import device_count, is_available

__all__ = ["device_count", "is_available"]
