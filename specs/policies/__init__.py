"""Autocast policies shipped with ampref, installed as the package ``ampref.policy.shipped``.

The TOML files beside this one are the single source of the shipped policies: the build
maps this folder into the package (``pyproject.toml``) and ``ampref.policy.policies``
reads the files as package data with ``importlib.resources``.
"""
