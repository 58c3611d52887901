"""ampref: the executable reference for automatic mixed precision numerics."""

from __future__ import annotations

from . import accumulation, amp, functional, nn, optim, recipes, scaling, tensorcore
from .accumulation import error_bound, matmul
from .autocast_mode import autocast
from .policy import MixedPolicy, Policy, get_policy, load_policy
from .cast import as_ml_dtype, decode, encode, quantize, value_table
from .formats import FORMATS, Encoding, Format, format_names, get_format
from .rounding import RoundingMode, get_rounding
from .lossscaler import LossScaler, StaticLossScaler
from .tensor import Tensor, no_grad, tensor

__version__ = "0.1.0"

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

__all__ = [
    "FORMATS", "Encoding", "Format", "LossScaler", "RoundingMode", "StaticLossScaler",
    "recipes", "scaling", "accumulation", "as_ml_dtype", "decode",
    "encode", "error_bound", "matmul", "tensorcore",
    "format_names", "get_format", "get_rounding", "quantize", "value_table",
    "Tensor", "tensor", "no_grad", "autocast", "Policy", "MixedPolicy", "get_policy",
    "load_policy", "functional", "nn", "optim", "amp",
    *FORMATS,
]
