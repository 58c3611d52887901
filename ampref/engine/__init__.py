"""The autograd-lite engine: tensors of any format and backward (``tensor``), the ops with
their derivatives (``functional``), modules (``nn``), optimizers (``optim``), the
torch-shaped ``GradScaler``/``autocast`` front door (``amp``) and counter-based random
generators (``rng``). Spec: ``specs/engine.md``.

Imports: every room below it (common, formats, accumulation, recipes, scaling, policy,
backends). Inside the room one hook goes upward: ``Tensor``'s operators call
``functional`` through a function-level import, so ``tensor`` loads before the ops.
"""
