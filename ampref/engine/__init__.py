"""The autograd-lite engine: tensors of any format and backward (``tensor``), torch's
tensor methods (``methods``), integer tensors (``indices``), making tensors and the global
generator (``creation``), the ops with their derivatives (``functional``), modules
(``nn``), optimizers and schedulers (``optim``), checkpoints (``serialization``), the
torch-shaped ``GradScaler``/``autocast`` front door (``amp``) and counter-based random
generators (``rng``). Spec: ``specs/engine.md``.

Imports: every room below it (common, formats, accumulation, recipes, scaling, policy,
backends). Inside the room four hooks go upward, each a function-level import:
``Tensor``'s operators and its methods call ``functional`` (so ``tensor`` loads before the
ops), an integer tensor's cast calls ``creation.tensor``, and the 0.1 name
``engine.tensor.tensor`` resolves to ``creation``.
"""
