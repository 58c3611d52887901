"""A signature fuzz over the public surface (API-ERR-001, issue 38): every public callable
of ampref's modules is either called here or exempted with a reason; for each call, each
parameter whose annotation is int, float, bool, a name choice, an array, a Tensor or one
of ampref's record classes (a scaler config, a quantized tensor, a data-parallel row) is
replaced, one at a time (keyword-only and defaulted ones too), by values that are wrong
for that annotation. The call must raise ValueError or TypeError naming the problem:
any other exception is *foreign*, no exception is *silent*. Both counts must be 0.

Wrong values per kind: int: 1.5, "2", [], None (unless Optional); float: "x", [], 1j,
None, and NaN/inf for parameters that need a finite number (rates, scales, epsilons,
probabilities); bool: "yes", 2, None; a name choice: "no-such-name", 3.5, None; an array:
complex, object and string arrays, None; a Tensor: "x", None; a record: "x", 3, None (a
foreign AttributeError from reading its fields is what this catches); bytes: a str, 3,
None."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import math
import types
import typing
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import ampref
from ampref import distributed, nn, optim, recipes, scaling, tensorcore, testing
from ampref.accumulation import dot, parse_model
from ampref.engine import functional as F
from ampref.engine.tensor import Tensor
from ampref.kernels import compiled_available
from ampref.policy import parse_policy, policy_names

#: the torch bridge is part of the surface wherever torch is installed
TORCH = importlib.util.find_spec("torch") is not None
MODULES = ("ampref", "ampref.engine.cuda", "ampref.functional", "ampref.nn", "ampref.nn.init",
           "ampref.optim",
           "ampref.recipes",
           "ampref.tensorcore", "ampref.amp", "ampref.accumulation", "ampref.scaling",
           "ampref.formats", "ampref.policy", "ampref.testing", "ampref.distributed",
           *(("ampref.torch",) if TORCH else ()))
FINITE = {"lr", "eps", "momentum", "dampening", "weight_decay", "p", "init_scale",
          "growth_factor", "backoff_factor", "min_scale", "max_scale", "epsilon", "scale",
          "warn_scale_below"}
FREE_TEXT = {"name", "source", "msg", "what", "advice", "path", "f", "name_or_path"}
#: (call, parameter) pairs whose str is a free label, not a choice among names
LABELS = {("ampref.LossScaler", "profile")}
X = np.ones((4, 32), np.float32)


def _t(*shape: int) -> Tensor:
    return ampref.tensor(np.ones(shape or (2, 3), np.float32))


def _surface() -> dict[str, tuple[Callable[..., Any], list[Any], dict[str, Any]]]:
    """qualified name -> (callable, positional args, keyword args) of a call that works."""
    q = recipes.quantize(X, "mxfp8_e4m3")
    cfg = scaling.ScalerConfig()
    dp = distributed.get_dp("torch-ddp")
    return {
        "ampref.quantize": (ampref.quantize, [X, "bf16"], {}),
        "ampref.encode": (ampref.encode, [X, "e4m3"], {}),
        "ampref.decode": (ampref.decode, [np.array([1, 2], np.uint8), "e4m3"], {}),
        "ampref.as_ml_dtype": (ampref.as_ml_dtype, [np.array([1, 2], np.uint8), "e4m3"], {}),
        "ampref.value_table": (ampref.value_table, ["e4m3"], {}),
        "ampref.get_format": (ampref.get_format, ["e4m3"], {}),
        "ampref.get_rounding": (ampref.get_rounding, ["nearest_even"], {}),
        "ampref.error_bound": (ampref.error_bound, [np.ones(4), np.ones(4)], {}),
        "ampref.matmul": (ampref.matmul, [np.ones((2, 4)), np.ones((4, 2))],
                          {"input_format": "float32"}),
        "ampref.tensor": (ampref.tensor, [[1.0, 2.0]], {"requires_grad": False}),
        "ampref.zeros": (ampref.zeros, [2, 3], {"dtype": "float16"}),
        "ampref.ones": (ampref.ones, [2, 3], {"dtype": "float16"}),
        "ampref.full": (ampref.full, [(2,), 1.0], {}),
        "ampref.zeros_like": (ampref.zeros_like, [_t()], {}),
        "ampref.ones_like": (ampref.ones_like, [_t()], {}),
        "ampref.rand": (ampref.rand, [2, 3], {}),
        "ampref.randn": (ampref.randn, [2, 3], {}),
        "ampref.randint": (ampref.randint, [0, 5, (3,)], {}),
        "ampref.arange": (ampref.arange, [5], {}),
        "ampref.cat": (ampref.cat, [[_t(), _t()]], {"dim": 0}),
        "ampref.where": (ampref.where, [_t() > 0, _t(), 0.5], {}),
        "ampref.tril": (ampref.tril, [_t(), 1], {}),
        "ampref.triu": (ampref.triu, [_t(), -1], {}),
        "ampref.sqrt": (ampref.sqrt, [_t()], {}),
        "ampref.abs": (ampref.abs, [_t()], {}),
        "ampref.clamp": (ampref.clamp, [_t(), -1.0, 1.0], {}),
        "ampref.max": (ampref.max, [_t(), 1], {"keepdim": True}),
        "ampref.min": (ampref.min, [_t(), 1], {"keepdim": True}),
        "ampref.rsqrt": (ampref.rsqrt, [_t()], {}),
        "ampref.manual_seed": (ampref.manual_seed, [3], {}),
        "ampref.set_kernels": (ampref.set_kernels, [ampref.get_kernels()], {}),
        "ampref.use_kernels": (ampref.use_kernels, ["numpy"], {}),
        "ampref.autocast": (ampref.autocast, ["cpu", "bfloat16"], {}),
        "ampref.load_policy": (ampref.load_policy, ["torch-cpu"], {}),
        "ampref.get_policy": (ampref.get_policy,
                              ["params=float32,compute=float16,output=float32"], {}),
        "ampref.LossScaler": (ampref.LossScaler, [], {"init_scale": 2.0**16}),
        "ampref.StaticLossScaler": (ampref.StaticLossScaler, [128.0], {}),
        "ampref.Generator": (ampref.Generator, [1], {}),
        "ampref.functional.add": (F.add, [_t(), _t()], {}),
        "ampref.functional.sub": (F.sub, [_t(), _t()], {}),
        "ampref.functional.mul": (F.mul, [_t(), _t()], {}),
        "ampref.functional.div": (F.div, [_t(), _t()], {}),
        "ampref.functional.neg": (F.neg, [_t()], {}),
        "ampref.functional.exp": (F.exp, [_t()], {}),
        "ampref.functional.log": (F.log, [_t()], {}),
        "ampref.functional.tanh": (F.tanh, [_t()], {}),
        "ampref.functional.sigmoid": (F.sigmoid, [_t()], {}),
        "ampref.functional.relu": (F.relu, [_t()], {}),
        "ampref.functional.silu": (F.silu, [_t()], {}),
        "ampref.functional.abs": (F.abs, [_t()], {}),
        "ampref.functional.clamp": (F.clamp, [_t(), -1.0, 1.0], {}),
        "ampref.functional.max": (F.max, [_t(), 1], {"keepdim": True}),
        "ampref.functional.min": (F.min, [_t(), 1], {"keepdim": True}),
        "ampref.functional.sqrt": (F.sqrt, [_t()], {}),
        "ampref.functional.rsqrt": (F.rsqrt, [_t()], {}),
        "ampref.device": (ampref.device, ["cuda"], {"index": 0}),
        "ampref.functional.var": (F.var, [_t()], {"dim": 1, "correction": 0, "keepdim": True}),
        "ampref.functional.std": (F.std, [_t()], {"dim": 1, "correction": 0, "keepdim": True}),
        "ampref.functional.sort": (F.sort, [_t()], {"dim": 0, "descending": True,
                                                     "stable": True}),
        "ampref.functional.topk": (F.topk, [_t(), 2], {"dim": 1, "largest": False,
                                                       "sorted": True}),
        "ampref.multinomial": (ampref.multinomial, [_t(), 2],
                               {"replacement": True, "generator": ampref.Generator(1)}),
        "ampref.functional.gather": (F.gather, [_t(), 1, ampref.tensor([[0], [2]])], {}),
        "ampref.functional.one_hot": (F.one_hot, [ampref.tensor([0, 2])], {"num_classes": 3}),
        "ampref.functional.pad": (F.pad, [_t(), (1, 1)], {"mode": "constant", "value": 0.5}),
        "ampref.functional.log1p": (F.log1p, [_t()], {}),
        "ampref.functional.expm1": (F.expm1, [_t()], {}),
        "ampref.functional.reciprocal": (F.reciprocal, [_t()], {}),
        "ampref.functional.leaky_relu": (F.leaky_relu, [_t()], {"negative_slope": 0.2}),
        "ampref.functional.sin": (F.sin, [_t()], {}),
        "ampref.functional.cos": (F.cos, [_t()], {}),
        "ampref.functional.stack": (F.stack, [[_t(), _t()]], {"dim": 1}),
        "ampref.functional.outer": (F.outer, [_t(3), _t(2)], {}),
        "ampref.nn.init.calculate_gain": (nn.init.calculate_gain, ["leaky_relu", 0.2], {}),
        "ampref.nn.init.uniform_": (nn.init.uniform_, [_t()], {"a": -1.0, "b": 1.0}),
        "ampref.nn.init.normal_": (nn.init.normal_, [_t()], {"mean": 0.5, "std": 0.1}),
        "ampref.nn.init.trunc_normal_": (nn.init.trunc_normal_, [_t()],
                                         {"mean": 0.0, "std": 1.0, "a": -1.0, "b": 1.0}),
        "ampref.nn.init.constant_": (nn.init.constant_, [_t(), 0.25], {}),
        "ampref.nn.init.ones_": (nn.init.ones_, [_t()], {}),
        "ampref.nn.init.zeros_": (nn.init.zeros_, [_t()], {}),
        "ampref.nn.init.eye_": (nn.init.eye_, [_t()], {}),
        "ampref.nn.init.xavier_uniform_": (nn.init.xavier_uniform_, [_t()], {"gain": 2.0}),
        "ampref.nn.init.xavier_normal_": (nn.init.xavier_normal_, [_t()], {"gain": 2.0}),
        "ampref.nn.init.kaiming_uniform_": (nn.init.kaiming_uniform_, [_t()],
                                            {"a": 0.1, "mode": "fan_out",
                                             "nonlinearity": "leaky_relu"}),
        "ampref.nn.init.kaiming_normal_": (nn.init.kaiming_normal_, [_t()],
                                           {"a": 0.1, "mode": "fan_in",
                                            "nonlinearity": "leaky_relu"}),
        "ampref.functional.where": (F.where, [_t() > 0, _t(), _t()], {}),
        "ampref.functional.tril": (F.tril, [_t()], {"diagonal": 1}),
        "ampref.functional.triu": (F.triu, [_t()], {"diagonal": 1}),
        "ampref.functional.gelu": (F.gelu, [_t()], {}),
        "ampref.functional.pow": (F.pow, [_t(), 2], {}),
        "ampref.functional.softmax": (F.softmax, [_t(), 1], {}),
        "ampref.functional.log_softmax": (F.log_softmax, [_t(), 1], {}),
        "ampref.functional.sum": (F.sum, [_t()], {"dim": 0}),
        "ampref.functional.mean": (F.mean, [_t()], {"dim": 0}),
        "ampref.functional.matmul": (F.matmul, [_t(2, 3), _t(3, 2)], {}),
        "ampref.functional.linear": (F.linear, [_t(2, 3), _t(4, 3)], {}),
        "ampref.functional.layer_norm": (F.layer_norm, [_t(), [3]], {}),
        "ampref.functional.rms_norm": (F.rms_norm, [_t(), [3]], {}),
        "ampref.functional.dropout": (F.dropout, [_t()], {"p": 0.5, "seed": 1}),
        "ampref.functional.broadcast_to": (F.broadcast_to, [_t(1, 3), (2, 3)], {}),
        "ampref.functional.reshape": (F.reshape, [_t(), (3, 2)], {}),
        "ampref.functional.transpose": (F.transpose, [_t(), 0, 1], {}),
        "ampref.functional.permute": (F.permute, [_t(), (1, 0)], {}),
        "ampref.functional.index": (F.index, [_t(), 1], {}),
        "ampref.functional.concat": (F.concat, [[_t(), _t()]], {"dim": 0}),
        "ampref.functional.masked_fill": (F.masked_fill, [_t(), np.zeros((2, 3), bool), 0.0],
                                          {}),
        "ampref.functional.to_format": (F.to_format, [_t(), "bf16"], {}),
        "ampref.functional.embedding": (F.embedding, [np.array([0, 1]), _t(4, 3)], {}),
        "ampref.functional.conv2d": (F.conv2d, [_t(1, 1, 4, 4), _t(1, 1, 3, 3)], {}),
        "ampref.functional.scaled_dot_product_attention": (
            F.scaled_dot_product_attention, [_t(1, 2, 3, 4)] * 3, {}),
        "ampref.functional.cross_entropy": (F.cross_entropy, [_t(2, 3), ampref.tensor([0, 1])],
                                            {}),
        "ampref.functional.nll_loss": (F.nll_loss, [_t(2, 3), ampref.tensor([0, 1])], {}),
        "ampref.functional.mse_loss": (F.mse_loss, [_t(), _t()], {}),
        "ampref.functional.binary_cross_entropy": (
            F.binary_cross_entropy, [_t() * 0.5, _t() * 0.5], {}),
        "ampref.nn.Linear": (nn.Linear, [3, 4], {}),
        "ampref.nn.Conv2d": (nn.Conv2d, [1, 2, 3], {}),
        "ampref.nn.LayerNorm": (nn.LayerNorm, [3], {}),
        "ampref.nn.RMSNorm": (nn.RMSNorm, [3], {}),
        "ampref.nn.Embedding": (nn.Embedding, [5, 3], {}),
        "ampref.nn.MultiheadAttention": (nn.MultiheadAttention, [4, 2], {}),
        "ampref.nn.TransformerBlock": (nn.TransformerBlock, [8, 2], {}),
        "ampref.nn.MLP": (nn.MLP, [[4, 8, 2]], {}),
        "ampref.nn.Dropout": (nn.Dropout, [0.5], {}),
        "ampref.nn.Softmax": (nn.Softmax, [1], {}),
        "ampref.nn.Flatten": (nn.Flatten, [1, -1], {}),
        "ampref.nn.Parameter": (nn.Parameter, [np.ones(3)], {}),
        "ampref.optim.SGD": (optim.SGD, [nn.Linear(2, 2).parameters()], {"lr": 0.1}),
        "ampref.optim.Adam": (optim.Adam, [nn.Linear(2, 2).parameters()], {"lr": 0.1}),
        "ampref.optim.AdamW": (optim.AdamW, [nn.Linear(2, 2).parameters()], {"lr": 0.1}),
        "ampref.amp.GradScaler": (ampref.amp.GradScaler, ["cpu"], {}),
        "ampref.recipes.quantize": (recipes.quantize, [X, "mxfp8_e4m3"], {"profile": "ocp"}),
        "ampref.recipes.dequantize": (recipes.dequantize, [q], {}),
        "ampref.recipes.compare": (recipes.compare, [X, "mxfp8_e4m3"], {}),
        "ampref.recipes.get_recipe": (recipes.get_recipe, ["nvfp4"], {}),
        "ampref.recipes.get_profile": (recipes.get_profile, ["te"], {}),
        "ampref.recipes.hadamard_matrix": (recipes.hadamard_matrix, [16], {}),
        "ampref.recipes.rht": (recipes.rht, [np.ones((2, 16), np.float32)], {}),
        "ampref.recipes.amax": (recipes.amax, [X], {}),
        "ampref.recipes.DelayedScaling": (recipes.DelayedScaling, [], {"margin": 0}),
        "ampref.recipes.current_scale": (recipes.current_scale, [3.0], {}),
        "ampref.recipes.quantize_per_tensor": (recipes.quantize_per_tensor, [X, 2.0], {}),
        "ampref.recipes.mx_quantize": (recipes.mx_quantize, [X], {}),
        "ampref.recipes.mx_scale_exponents": (recipes.mx_scale_exponents,
                                              [np.ones(4, np.float32), "e4m3"], {}),
        "ampref.tensorcore.get_gpu": (tensorcore.get_gpu, ["h100"], {}),
        "ampref.tensorcore.block_params": (tensorcore.block_params, ["h100", "fp16", "fp32"],
                                           {}),
        "ampref.tensorcore.dot": (tensorcore.dot, [np.ones(16), np.ones(16)],
                                  {"gpu": "h100", "input_format": "fp16"}),
        "ampref.tensorcore.gemm": (tensorcore.gemm, [np.ones((4, 16)), np.ones((4, 16)),
                                                     np.zeros((4, 4))],
                                   {"gpu": "h100", "input_format": "fp16"}),
        "ampref.tensorcore.tf32_words": (tensorcore.tf32_words, [np.ones(4, np.float32)], {}),
        "ampref.accumulation.dot": (dot, [np.ones(8), np.ones(8)], {}),
        "ampref.accumulation.parse_model": (parse_model, ["tensorcore:h100"], {}),
        "ampref.scaling.ScalerConfig": (scaling.ScalerConfig, [], {"init_scale": 8.0}),
        "ampref.scaling.initial_state": (scaling.initial_state, [cfg], {}),
        "ampref.scaling.transition": (scaling.transition,
                                      [cfg, scaling.initial_state(cfg), False], {}),
        "ampref.policy.policy_names": (policy_names, [], {}),
        "ampref.policy.parse_policy": (parse_policy, [
            b'name = "p"\ndefault_dtype = "float16"\ndevice = "cpu"\n[ops]\n'
            b'lower_precision_fp = ["mm"]\n', "inline"], {}),
        "ampref.testing.ordinal": (testing.ordinal, [np.ones(3, np.float32)], {}),
        "ampref.testing.assert_within_ulps": (testing.assert_within_ulps,
                                              [np.ones(3), np.ones(3), 1], {}),
        "ampref.testing.assert_bitwise_equal": (testing.assert_bitwise_equal,
                                                [np.ones(3), np.ones(3)], {}),
        "ampref.distributed.get_dp": (distributed.get_dp, ["torch-ddp"], {}),
        "ampref.distributed.all_reduce": (distributed.all_reduce, [np.ones((2, 8))], {}),
        "ampref.distributed.to_reduce_dtype": (distributed.to_reduce_dtype,
                                               [np.ones(4), "float16"], {}),
        "ampref.distributed.ring_chunks": (distributed.ring_chunks, [16, 2, 4], {}),
        "ampref.distributed.fsdp_predivide": (distributed.fsdp_predivide, [8], {}),
        "ampref.distributed.divide_factors": (distributed.divide_factors,
                                              [dp, 4, "float16"], {}),
        "ampref.distributed.buckets": (distributed.buckets, [[10, 20], [100, 200]], {}),
        **_bridge_surface(),
        **_method_surface(),
    }


def _method_surface() -> dict[str, tuple[Callable[..., Any], list[Any], dict[str, Any]]]:
    """The torch-named methods of float and integer tensors whose parameters are
    annotated (a fresh tensor bound to each)."""
    def ids() -> Any:
        return ampref.tensor(np.arange(6).reshape(2, 3))
    return {
        "Tensor.size": (_t().size, [0], {}),
        "Tensor.flatten": (_t().flatten, [0, -1], {}),
        "Tensor.unsqueeze": (_t().unsqueeze, [0], {}),
        "Tensor.squeeze": (_t().squeeze, [0], {}),
        "Tensor.transpose": (_t().transpose, [0, 1], {}),
        "Tensor.softmax": (_t().softmax, [1], {}),
        "Tensor.log_softmax": (_t().log_softmax, [1], {}),
        "Tensor.masked_fill": (_t().masked_fill, [np.zeros((2, 3), bool), 0.0], {}),
        "Tensor.argmax": (_t().argmax, [1], {"keepdim": True}),
        "Tensor.argmin": (_t().argmin, [1], {"keepdim": True}),
        "Tensor.split": (_t().split, [1], {"dim": 0}),
        "Tensor.chunk": (_t().chunk, [3], {"dim": 1}),
        "Tensor.sum": (_t().sum, [], {"dim": 0, "keepdim": True}),
        "Tensor.mean": (_t().mean, [], {"dim": 0, "keepdim": True}),
        "Tensor.requires_grad_": (_t().requires_grad_, [True], {}),
        "Tensor.to": (_t().to, ["bf16"], {}),
        "Tensor.clamp": (_t().clamp, [-1.0, 1.0], {}),
        "Tensor.type_as": (_t().type_as, [_t()], {}),
        "Tensor.max": (_t().max, [1], {"keepdim": True}),
        "Tensor.var": (_t().var, [1], {"unbiased": False, "keepdim": True}),
        "Tensor.std": (_t().std, [1], {"correction": 0, "keepdim": True}),
        "Tensor.sort": (_t().sort, [1], {"descending": True, "stable": True}),
        "Tensor.topk": (_t().topk, [2], {"dim": 1, "largest": False, "sorted": True}),
        "Tensor.gather": (_t().gather, [1, ampref.tensor([[0], [1]])], {}),
        "Tensor.clamp_": (_t().clamp_, [-1.0, 1.0], {}),
        "Tensor.fill_": (_t().fill_, [2.0], {}),
        "Tensor.masked_fill_": (_t().masked_fill_, [np.zeros((2, 3), bool), 0.5], {}),
        "Module.register_buffer": (nn.Linear(2, 2).register_buffer, ["b", _t()],
                                   {"persistent": False}),
        "Module.requires_grad_": (nn.Linear(2, 2).requires_grad_, [False], {}),
        "Module.to_format": (nn.Linear(2, 2).to_format, ["bf16"], {}),
        "IndexTensor.size": (ids().size, [0], {}),
        "IndexTensor.unsqueeze": (ids().unsqueeze, [0], {}),
        "IndexTensor.sum": (ids().sum, [], {"dim": 0, "keepdim": True}),
        "IndexTensor.argmax": (ids().argmax, [1], {"keepdim": True}),
        "IndexTensor.argmin": (ids().argmin, [1], {"keepdim": True}),
        "IndexTensor.transpose": (ids().transpose, [0, 1], {}),
        "IndexTensor.cumsum": (ids().cumsum, [1], {}),
        "IndexTensor.clamp": (ids().clamp, [0, 4], {}),
        "IndexTensor.all": (ids().all, [1], {"keepdim": True}),
        "IndexTensor.any": (ids().any, [1], {"keepdim": True}),
        "IndexTensor.count_nonzero": (ids().count_nonzero, [1], {}),
        "IndexTensor.max": (ids().max, [1], {"keepdim": True}),
        "IndexTensor.fill_": (ids().fill_, [2], {}),
    }


def _bridge_surface() -> dict[str, tuple[Callable[..., Any], list[Any], dict[str, Any]]]:
    """The torch bridge's calls (entered as contexts by :func:`_call`), where torch is."""
    if not TORCH:
        return {}
    import torch

    import ampref.torch as at
    return {
        "ampref.torch.emulate": (at.emulate, [], {"recipe": "nvfp4"}),
        "ampref.torch.shadow": (at.shadow, [], {}),
        "ampref.torch.autocast": (at.autocast, ["cpu"], {"dtype": torch.bfloat16}),
    }


#: public callables not fuzzed here, and why
EXEMPT = {
    # records, enums and exceptions: built by the library, validated where they are read
    "Encoding", "Format", "RoundingMode", "Policy", "MixedPolicy", "IndexTensor", "Tensor",
    "Quantized", "Comparison", "Recipe", "Profile", "TensorCoreGPU", "Path", "Rules",
    "DelayedState", "ScalerState", "ScaleEvent", "ScaleFloorError", "LossScaleWarning",
    "Identification", "BlockIdentification", "GemmIdentification", "ScalerIdentification",
    "DPStep", "DataParallel", "ParamGroup", "Optimizer", "Module", "Sequential",
    "ModuleDict", "ModuleList", "GELU", "ReLU", "Tanh", "Sigmoid", "SiLU", "Identity",
    "CrossEntropyLoss", "MSELoss", "NLLLoss",  # no numeric arguments of their own
    # no arguments, or internal checks that exist to raise
    "format_names", "initial_seed", "get_kernels", "no_grad", "policy_names", "is_available",
    "device_count",
    "check_int", "check_range", "check_state", "check_inputs", "exponents", "make_event",
    "store_scale",
    # hypothesis strategies and property drivers: covered by tests/test_testing.py
    "representable", "arrays", "hard_cases", "block_cases", "operands", "assert_matches",
    "assert_block_matches", "assert_gemm_matches", "assert_scaler_matches", "identify",
    "identify_block", "identify_gemm", "identify_scaler",
    # the per-rank step takes gradient pytrees: covered by tests/dataparallel
    "data_parallel_step", "save", "load",  # save/load: tests/bad_input/test_fuzz.py
    "autocast_", "GradScaler_",
    # the bridge's records and errors; register_autocast changes a process-wide table
    # (its bad inputs: tests/bridge/test_outside_casts.py); supported_ops takes none
    "OpCast", "OpRecord", "Report", "UnknownCastRuleError", "UnsupportedOpError",
    "register_autocast", "supported_ops",
}


def _kind(hint: Any) -> tuple[str | None, bool]:
    """(kind, optional) of an annotation: int, float, bool, choice, array, tensor, record,
    bytes, ints (a sequence of ints, or an int or such a tuple)."""
    if typing.get_origin(hint) is typing.Literal and all(
            isinstance(a, str) for a in typing.get_args(hint)):
        return "choice", False
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) or \
        typing.get_origin(hint) is typing.Union else (hint,)
    optional = type(None) in args
    args = tuple(a for a in args if a is not type(None))
    text = " ".join(str(a) for a in args)
    if "numpy" in text and ("SupportsArray" in text or "ndarray" in text):
        return "array", optional
    if args == (Tensor,):
        return "tensor", optional
    if args == (bool,):
        return "bool", optional
    if args == (bytes,):
        return "bytes", optional
    if all(a is int or typing.get_origin(a) in (tuple, list, Sequence) and
           all(b is int or b is Ellipsis for b in typing.get_args(a)) for a in args):
        return "ints", optional
    if args == (int,):
        return "int", optional
    if args == (float,) or set(args) == {int, float}:
        return "float", optional
    if str in args and all(a is str or isinstance(a, type) for a in args):
        return "choice", optional
    if len(args) == 1 and isinstance(args[0], type) and args[0].__module__.startswith("ampref"):
        return "record", optional
    return None, optional


def _bad_values(kind: str, optional: bool, name: str, free: bool) -> list[Any]:
    none = [] if optional else [None]
    table: dict[str, list[Any]] = {
        "int": [1.5, "2", []] + none,
        "float": ["x", [], 1j] + none + ([math.nan, math.inf] if name in FINITE else []),
        "bool": ["yes", 2] + none,
        "choice": ([] if free or name in FREE_TEXT else ["no-such-name"]) + [3.5] + none,
        "array": [np.array([1j, 2j]), np.ones((2, 2), object), np.array(["a", "b"])] + none,
        "tensor": ["x"] + none,
        "record": ["x", 3] + none,
        "bytes": ["text, not bytes", 3] + none,
        "ints": [[1.5], ["a"], (1, None), 2.5] + none,
    }
    return table[kind]


def _call(fn: Callable[..., Any], args: list[Any], kw: dict[str, Any]) -> None:
    out = fn(*args, **kw)
    if isinstance(out, contextlib.AbstractContextManager) and not isinstance(out, Tensor):
        with out:
            pass


def _hints(fn: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    target = fn.__init__ if isinstance(fn, type) else fn  # type: ignore[misc]
    target = inspect.unwrap(target)
    return inspect.signature(target), typing.get_type_hints(target)


def test_every_public_callable_is_fuzzed_or_exempted_with_a_reason() -> None:
    """Inputs: the callables in the ``__all__`` of each public module. Expected: each is
    in the fuzz table or the exemption set. Pass: none left out."""
    covered = {name.rsplit(".", 1)[1] for name in _surface()} | EXEMPT
    missing = []
    for mod in MODULES:
        m = importlib.import_module(mod)
        missing += [f"{mod}.{n}" for n in getattr(m, "__all__", [])
                    if callable(getattr(m, n, None)) and n not in covered]
    assert not missing, f"public callables neither fuzzed nor exempted: {missing}"


def _outcome(fn: Callable[..., Any], args: list[Any], kw: dict[str, Any], kernels: str) -> str:
    """How one call ends, NumPy warnings counted as errors: "named" (ValueError or
    TypeError), "accepted", or the other exception's type and message."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            _call(fn, args, kw)
        except (ValueError, TypeError):
            return "named"
        except Exception as e:  # noqa: BLE001 - the others are what the tests collect
            return f"{type(e).__name__}: {str(e)[:80]}"
        finally:
            ampref.set_kernels(kernels)
    return "accepted"


def _replaced(values_of: Callable[[str, str, Any, Any], list[Any]]) -> Iterator[
        tuple[str, Callable[..., Any], str, Any, list[Any], dict[str, Any]]]:
    """Each call of the table with one parameter replaced by each value that
    ``values_of(call name, parameter, annotation, value given)`` lists: (call name,
    callable, parameter, value, args, kwargs)."""
    for name, (fn, args, kw) in _surface().items():
        sig, hints = _hints(fn)
        params = [p for p in sig.parameters.values() if p.name != "self"
                  and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        for i, p in enumerate(params):
            positional = i < len(args) and p.kind is not p.KEYWORD_ONLY
            given = args[i] if positional else kw.get(p.name)
            for v in values_of(name, p.name, hints.get(p.name), given):
                a2, k2 = list(args), dict(kw)
                if positional:
                    a2[i] = v
                else:
                    k2[p.name] = v
                yield name, fn, p.name, v, a2, k2


@pytest.mark.clause("API-ERR-001")
def test_every_wrongly_typed_argument_of_the_public_surface_is_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: each call of the table with one annotated parameter replaced by each wrong
    value of its kind (module docstring). Expected: ValueError or TypeError. Pass: no
    foreign exception, no silent acceptance (both lists empty; warnings are errors)."""
    monkeypatch.chdir(tmp_path)
    kernels = ampref.get_kernels()
    foreign: list[str] = []
    silent: list[str] = []
    tried = 0
    for fn, args, kw in _surface().values():
        _call(fn, args, kw)  # the unmodified call works

    def wrong(name: str, param: str, hint: Any, given: Any) -> list[Any]:
        kind, optional = _kind(hint)
        return [] if kind is None else _bad_values(kind, optional, param,
                                                   (name, param) in LABELS)

    for name, fn, param, bad, a2, k2 in _replaced(wrong):
        tried += 1
        outcome = _outcome(fn, a2, k2, kernels)
        shown = f"{name}({param}={repr(bad).replace(chr(10), ' '):.24})"
        if outcome == "accepted":
            silent.append(f"{shown} accepted")
        elif outcome != "named":
            foreign.append(f"{shown}: {outcome}")
    assert tried > 800
    assert not foreign and not silent, (f"{len(foreign)} foreign, {len(silent)} silent of "
                                        f"{tried}:\n" + "\n".join((foreign + silent)[:400]))


def _extremes(kind: str | None, given: Any) -> list[Any]:
    """The far-out values of a float parameter, or arrays of them in a floating array
    parameter's shape; nothing for other kinds."""
    if kind == "float":
        return [1e300, -1e300, -1.0]
    if kind == "array" and isinstance(given, np.ndarray) and given.dtype.kind == "f":
        return [np.full(given.shape, v) for v in (1e300, -1e300, 1e-320, np.nan, np.inf,
                                                  -np.inf)]
    return []


@pytest.mark.clause("API-ERR-001")
def test_a_float_past_float32s_range_is_refused_or_read_without_a_numpy_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Inputs: each call of the table with one float parameter set to 1e300, then -1e300
    and -1.0 (finite in float64, past float32's range or negative), and each floating
    array parameter replaced by a float64 array of its shape filled with 1e300, -1e300,
    1e-320 (a float64 subnormal), NaN, inf or -inf. Expected: a named ValueError/
    TypeError, or a result (the testing kit's assertions may fail, that is their job);
    never another exception and never a NumPy warning (an overflow in a float32 cast
    reached users from three calls and six recipe functions). Pass: the list of other
    outcomes is empty."""
    monkeypatch.chdir(tmp_path)
    kernels = ampref.get_kernels()
    foreign: list[str] = []
    tried = 0
    for name, fn, param, big, a2, k2 in _replaced(
            lambda name, param, hint, given: _extremes(_kind(hint)[0], given)):
        tried += 1
        outcome = _outcome(fn, a2, k2, kernels)
        checking = name.startswith("ampref.testing.assert_")  # failing is their job
        if outcome not in ("named", "accepted") and not (
                checking and outcome.startswith("AssertionError")):
            shown = f"full {big.flat[0]}" if isinstance(big, np.ndarray) else big
            foreign.append(f"{name}({param}={shown}): {outcome}")
    assert tried > 100
    assert not foreign, f"{len(foreign)} of {tried}:\n" + "\n".join(foreign)


@pytest.mark.clause("API-ERR-001", "ENG-MM-003")
@pytest.mark.parametrize("kernels", ["numpy"] + (["compiled"] if compiled_available() else []))
def test_engine_ops_on_extreme_tensors_emit_no_numpy_warning(kernels: str) -> None:
    """Inputs: each call of the table whose argument is a floating Tensor, given instead a
    tensor of its shape filled with ±3e38, ±inf, NaN, 1e-45, ±0, 65504 or 1e30, held in
    float32, float16 and bfloat16 (rounded into the format), forward and (where it needs
    grad) backward, on each kernel set. Expected: a result or a named ValueError/
    TypeError, never a NumPy warning (an exactly-by-range GEMM whose sums pass float32's
    range warned from its float32 rounding). Pass: no other outcome."""
    before = ampref.get_kernels()
    ampref.set_kernels(kernels)
    foreign: list[str] = []
    try:
        for name, (fn, args, kw) in _surface().items():
            for where, given in [*enumerate(args), *kw.items()]:
                if not isinstance(given, Tensor) or given.data.dtype.kind != "f":
                    continue
                for v in (3e38, -3e38, np.inf, -np.inf, np.nan, 1e-45, 0.0, -0.0, 65504.0, 1e30):
                    for fmt in ("float32", "float16", "bfloat16"):
                        data = np.full(given.shape, v, np.float32)
                        bad = ampref.tensor(data if fmt == "float32" else
                                            ampref.quantize(data, fmt), fmt,
                                            requires_grad=given.requires_grad)
                        a2, k2 = list(args), dict(kw)
                        if isinstance(where, int):
                            a2[where] = bad
                        else:
                            k2[str(where)] = bad
                        with warnings.catch_warnings():
                            warnings.simplefilter("error")
                            try:
                                out = fn(*a2, **k2)
                                if isinstance(out, Tensor) and out.requires_grad:
                                    out.sum().backward()
                            except (ValueError, TypeError):
                                pass
                            except Exception as e:  # noqa: BLE001 - collecting the others
                                foreign.append(f"{name}({where}={v} {fmt}): "
                                               f"{type(e).__name__}: {str(e)[:80]}")
                            finally:
                                ampref.set_kernels(kernels)
    finally:
        ampref.set_kernels(before)
    assert not foreign, "\n".join(sorted(set(foreign)))
