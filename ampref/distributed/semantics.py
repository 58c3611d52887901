"""Each framework's data-parallel overflow handling as data (``specs/distributed.md``
DPL-PRF-*): how gradients are laid out and reduced across ranks, what each rank checks
for an overflow, and how the ranks agree on ``found_inf``. Adding a framework is adding a
row of :data:`DP_PROFILES`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ampref.common.checks import check_count

from .collectives import ORDERS

__all__ = ["DEFAULT_DP", "DP_PROFILES", "DataParallel", "fsdp_predivide", "get_dp"]


@dataclass(frozen=True, kw_only=True)
class DataParallel:
    """One framework's data-parallel gradient reduction and overflow agreement.

    * ``layout``: ``buckets`` (DDP: parameters in reverse registration order, cut into
      buckets of ``bucket_caps`` bytes, one all-reduce per bucket) or ``flat`` (FSDP,
      Megatron, DeepSpeed: all parameters in registration order in one flat buffer,
      padded with zeros to a multiple of the rank count).
    * ``divide``: where the 1/N average is applied: ``pre`` (each rank's gradient times
      ``1/N`` before the sum), ``post`` (the sum times ``1/N``), ``split`` (FSDP: divided by
      :func:`fsdp_predivide` before, by N/that after), ``fsdp2`` (FSDP2: ``split`` for a
      float16 reduction, else the sum divided by N: ``ReduceOp.AVG``).
    * ``divide_op``: ``mul`` (times the reciprocal rounded to float32: DDP, Apex, DeepSpeed,
      Megatron) or ``div`` (an IEEE division: FSDP's ``div_``).
    * ``check``: what each rank inspects: ``full`` (the whole reduced gradient: every rank
      sees the same) or ``shard`` (its 1/N of the reduced flat buffer).
    * ``detect``: ``nonfinite`` (any inf/NaN element: torch's ``_amp_foreach_non_finite_
      check_and_unscale_``) or ``sum`` (DeepSpeed: the float32 sum of each tensor is inf/NaN,
      which also fires on finite tensors whose sum overflows).
    * ``agree``: how the per-rank flags become ``found_inf``: ``none`` (each rank keeps its
      own, equal on every rank under ``check=full``), ``sum`` (a count of flagged ranks),
      ``max`` (1 if any rank flagged).
    """

    name: str
    layout: Literal["buckets", "flat"]
    divide: Literal["pre", "post", "split", "fsdp2"]
    divide_op: Literal["mul", "div"] = "mul"
    check: Literal["full", "shard"]
    detect: Literal["nonfinite", "sum"] = "nonfinite"
    agree: Literal["none", "sum", "max"]
    order: str = "ring"
    bucket_caps: tuple[int, ...] = (1 << 20, 25 << 20)
    source: str = ""

    def __post_init__(self) -> None:
        for field, allowed in (("layout", ("buckets", "flat")),
                               ("divide", ("pre", "post", "split", "fsdp2")),
                               ("divide_op", ("mul", "div")), ("check", ("full", "shard")),
                               ("detect", ("nonfinite", "sum")),
                               ("agree", ("none", "sum", "max")), ("order", ORDERS)):
            if getattr(self, field) not in allowed:
                raise ValueError(f"DataParallel {self.name!r}: {field} must be one of "
                                 f"{', '.join(allowed)}, got {getattr(self, field)!r}")
        if not self.bucket_caps or any(c < 1 for c in self.bucket_caps):
            raise ValueError(f"DataParallel {self.name!r}: bucket_caps must be positive byte "
                             f"counts, got {self.bucket_caps!r}")


def fsdp_predivide(ranks: int) -> int:
    """FSDP's gradient pre-divide factor (``DefaultState._get_gradient_predivide_factor``):
    ``f = 1; while N % f == 0 and N / f > f: f *= 2``; the post-divide is ``N / f``
    (N = 2: 2 and 1; N = 4: 2 and 2; N = 8: 4 and 2)."""
    # torch's loop, kept as written: for N = 3 it stops at 2, so the post-divide is 1.5
    ranks = check_count("ranks", ranks)
    f = 1
    while ranks % f == 0 and ranks / f > f:
        f *= 2
    return f


_TORCH = "torch/amp/grad_scaler.py (_unscale_grads_, _maybe_opt_step)"

#: name -> data-parallel semantics (DPL-PRF-*). Adding a framework is adding a row.
DP_PROFILES: dict[str, DataParallel] = {p.name: p for p in (
    DataParallel(name="torch-ddp", layout="buckets", divide="pre", check="full", agree="none",
                 source="torch/csrc/distributed/c10d/reducer.cpp (mark_variable_ready_dense: "
                        "mul_out by 1/div_factor), torch/distributed/distributed_c10d.py; "
                        + _TORCH),
    DataParallel(name="torch-fsdp1", layout="flat", divide="split", divide_op="div",
                 check="shard", agree="sum",
                 source="torch/distributed/fsdp/sharded_grad_scaler.py (unscale_: all_reduce "
                        "of found_inf, default op SUM), torch/distributed/fsdp/_runtime_utils.py "
                        "(_div_if_needed, predivide/postdivide factors)"),
    DataParallel(name="torch-fsdp2", layout="flat", divide="fsdp2", divide_op="div",
                 check="shard", agree="max",
                 source="torch/distributed/tensor/_dispatch.py (found_inf: Partial('max')), "
                        "torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py "
                        "(_get_gradient_divide_factors); " + _TORCH),
    DataParallel(name="megatron", layout="flat", divide="pre", check="shard", agree="max",
                 source="megatron/core/distributed/param_and_grad_buffer.py "
                        "(gradient_scaling_factor = 1/dp size before the reduce-scatter), "
                        "megatron/core/optimizer/optimizer.py (_unscale_main_grads_and_check_"
                        "for_nan: all_reduce MAX; distributed optimizer)"),
    DataParallel(name="apex", layout="buckets", divide="post", check="full", agree="max",
                 source="apex/parallel/distributed.py (allreduce_bucket: predivide 1, then "
                        "times 1/world_size), apex/transformer/amp/grad_scaler.py (MAX per "
                        "optimizer, then summed over optimizers: one optimizer here)"),
    DataParallel(name="deepspeed", layout="flat", divide="post", check="shard", detect="sum",
                 agree="max",
                 source="deepspeed/runtime/zero/stage_1_and_2.py (allreduce_bucket: times "
                        "predivide/world_size after the all-reduce; has_overflow: MAX over "
                        "the data-parallel group), deepspeed/runtime/utils.py (_has_inf_or_nan: "
                        "float(x.float().sum()))"),
)}

#: the data-parallel semantics each loss-scale profile trains with unless ``--dp`` says
#: otherwise; Keras' and jmp's replicas sum gradients before the loss-scale check, as DDP
DEFAULT_DP = {"torch": "torch-ddp", "tf-keras": "torch-ddp", "keras3": "torch-ddp",
              "jmp": "torch-ddp", "apex": "apex", "deepspeed": "deepspeed",
              "deepspeed-consecutive": "deepspeed", "megatron": "megatron"}


def get_dp(name: str) -> DataParallel:
    """The semantics row named ``name``.

    Raises:
        ValueError: unknown name (the choices are listed).
    """
    if name not in DP_PROFILES:
        raise ValueError(f"unknown data-parallel semantics {name!r}; choose one of "
                         f"{', '.join(DP_PROFILES)}")
    return DP_PROFILES[name]
