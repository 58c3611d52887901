"""ampref: the executable reference for automatic mixed precision numerics.

The package is organised in rooms, one per concept, each importing only the rooms below
it (``docs/architecture.md``): common, formats, accumulation, recipes / scaling / policy,
backends, engine, training / certify. This module holds the public names and keeps the
flat module paths of release 0.1 importable (``OLD_PATHS``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from . import accumulation, recipes, scaling
from .accumulation import error_bound, matmul, tensorcore
from .engine import amp, functional, nn, optim
from .engine import cuda
from .engine.creation import (Generator, arange, full, initial_seed, manual_seed, ones,
                              ones_like, rand, randint, randn, tensor, zeros, zeros_like)
from .engine.functional import concat as cat
from .engine.functional import (abs, clamp, cos, max, min, outer, rsqrt, sin, sqrt, stack, tril,
                                triu, where)
from .engine.device import device
from .engine.indices import IndexTensor
from .engine.methods import std, var
from .engine.functional import expm1, gather, log1p, reciprocal, sort, topk
from .engine.sampling import multinomial
from .engine.serialization import load, save
from .engine.tensor import Tensor, no_grad
from .formats.cast import as_ml_dtype, decode, encode, quantize, value_table
from .formats.rounding import RoundingMode, get_rounding
from .formats.table import FORMATS, Encoding, Format, format_names, get_format
from .kernels import get_kernels, set_kernels, use_kernels
from .policy.autocast import autocast
from .policy.policies import MixedPolicy, Policy, get_policy, load_policy
from .scaling.scaler import LossScaler, StaticLossScaler

__version__ = "0.1.0"

#: module paths of release 0.1 (a flat package) -> where the module lives now; the
#: documented ones (ampref.nn, .functional, .optim, .amp, .tensorcore) among them. A
#: prefix maps its submodules too (ampref.nn.utils -> ampref.engine.nn.utils).
OLD_PATHS = {
    "checks": "common.checks", "atomicio": "common.atomicio",
    "rounding": "formats.rounding", "srhash": "kernels.srhash", "cast": "formats.cast",
    "castkernel": "kernels.encode", "exactsum": "formats.exactsum",
    "tensorcore": "accumulation.tensorcore", "gpus": "accumulation.gpus",
    "mfma": "accumulation.mfma", "blockmma": "accumulation.blockmma",
    "certified": "accumulation.certified",
    "lossscaler": "scaling.scaler", "audit": "scaling.audit",
    "autocast_mode": "policy.autocast",
    "tensor": "engine.tensor", "rng": "engine.rng", "functional": "engine.functional",
    "nn": "engine.nn", "optim": "engine.optim", "amp": "engine.amp",
    "trainconfig": "training.config", "corpus": "training.corpus", "run": "training.run",
    "faults": "training.faults", "checkpoint": "training.checkpoint",
    "stats": "training.stats", "quantreport": "training.quantreport",
    "report": "training.report", "train": "training.train",
    "verify": "certify.verify", "campaign": "certify.campaign",
    "evidence": "certify.evidence", "evidenceplugin": "certify.plugin",
    "certreport": "certify.report",
}


class _OldPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the very module object of its new place (one
    module, not a copy: classes, registries and caches stay shared). It runs before
    the path finder, so ``import ampref.nn.utils`` cannot load a second copy."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        head, _, rest = fullname.partition(".")
        first, _, tail = rest.partition(".")
        if head != __name__ or first not in OLD_PATHS:
            return None
        new = ".".join(filter(None, (__name__, OLD_PATHS[first], tail)))
        module = importlib.import_module(new)
        spec = importlib.util.spec_from_loader(fullname, self,
                                               is_package=hasattr(module, "__path__"))
        if spec is not None:
            spec.loader_state = module
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module: ModuleType = spec.loader_state
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run: the module was executed under its new name."""


if not any(isinstance(f, _OldPaths) for f in sys.meta_path):
    sys.meta_path.insert(0, _OldPaths())
# modules already loaded answer to their old path at once: a first ``import ampref.tensor``
# through the finder would rebind the attribute ampref.tensor (the function) to the module
# and as attributes, as ``import ampref.blockmma; ampref.blockmma.x`` needs: Python binds
# the parent's attribute only when it loads a module, not when sys.modules has it; a name
# the package already binds (ampref.tensor, the function) keeps its meaning
for _old, _new in OLD_PATHS.items():
    if f"{__name__}.{_new}" in sys.modules:
        sys.modules.setdefault(f"{__name__}.{_old}", sys.modules[f"{__name__}.{_new}"])
        globals().setdefault(_old, sys.modules[f"{__name__}.{_new}"])
del _old, _new

# every format of the table is public by its canonical name; spelled out (not a
# globals() update) so that static analysers see them, and checked against FORMATS by a test
float32 = FORMATS["float32"]
float16 = FORMATS["float16"]
bfloat16 = FORMATS["bfloat16"]
tf32 = FORMATS["tf32"]
float8_e4m3fn = FORMATS["float8_e4m3fn"]
float8_e5m2 = FORMATS["float8_e5m2"]
float8_e4m3fnuz = FORMATS["float8_e4m3fnuz"]
float8_e5m2fnuz = FORMATS["float8_e5m2fnuz"]
float8_e8m0fnu = FORMATS["float8_e8m0fnu"]
float6_e2m3fn = FORMATS["float6_e2m3fn"]
float6_e3m2fn = FORMATS["float6_e3m2fn"]
float4_e2m1fn = FORMATS["float4_e2m1fn"]
#: torch's integer dtype names: ``ampref.tensor(x, dtype=ampref.long)`` keeps x integer
int64 = long = "int64"

__all__ = [
    "FORMATS", "Encoding", "Format", "LossScaler", "RoundingMode", "StaticLossScaler",
    "recipes", "scaling", "accumulation", "as_ml_dtype", "decode",
    "encode", "error_bound", "matmul", "tensorcore",
    "format_names", "get_format", "get_rounding", "quantize", "value_table",
    "Tensor", "tensor", "no_grad", "IndexTensor", "Generator", "manual_seed", "initial_seed",
    "rand", "randn", "randint", "zeros", "ones", "full", "arange", "zeros_like", "ones_like",
    "save", "load", "cat", "int64", "long", "where", "tril", "triu", "sqrt", "rsqrt",
    "abs", "clamp", "max", "min", "sin", "cos", "stack", "outer", "device", "cuda",
    "var", "std", "sort", "topk", "multinomial", "gather",
    "log1p", "expm1", "reciprocal",
    "autocast", "Policy", "MixedPolicy", "get_policy",
    "load_policy", "functional", "nn", "optim", "amp", "get_kernels", "set_kernels",
    "use_kernels",
    *FORMATS,
]
