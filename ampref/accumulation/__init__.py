"""Matrix units: how dot products and GEMMs accumulate. Accumulation models by name and
error bounds (``models``), the NVIDIA tensor-core block-FMA model (``tensorcore``) with
its GPUs and switchable rules as data (``gpus``), Blackwell's block-scaled MMA
(``blockmma``), AMD's CDNA matrix cores (``mfma``), and exactly rounded float32 GEMMs and
sums at BLAS speed (``certified``). Spec: ``specs/accumulation.md``, ENG-MM, ENG-RED.

Imports: ``ampref.common`` and ``ampref.formats``. The names below are the
``ampref.accumulation`` module of earlier releases.
"""

from .models import MODELS, dot, error_bound, matmul, parse_model

__all__ = ["MODELS", "dot", "error_bound", "matmul", "parse_model"]
