"""Autocast: per-op precision policies as data (``policies``: torch's CUDA and CPU lists
shipped as TOML in ``shipped``, user TOML files, jmp-style strings) and autocast regions
with the cast plans the ops apply (``autocast``). Spec: ``specs/autocast.md``.

Imports: ``ampref.common`` and ``ampref.formats``. The names below are the
``ampref.policy`` module of earlier releases.
"""

from .policies import (CATEGORIES, MixedPolicy, Policy, get_policy, load_policy, parse_policy,
                       policy_names)

__all__ = ["CATEGORIES", "MixedPolicy", "Policy", "get_policy", "load_policy", "parse_policy",
           "policy_names"]
