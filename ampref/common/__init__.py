"""Helpers every room may use: argument checks that name the bad value (``checks``) and
atomic file writes that never destroy the previous file (``atomicio``).

Imports: the standard library and NumPy only; no other ampref room.
"""
