"""Record real multi-process torch data-parallel runs for tests/data/dp_traces.npz.

Spawns N processes on localhost with torch.distributed (gloo, CPU) and trains a small MLP
under DDP + torch.amp.GradScaler and under FSDP1 (FULL_SHARD) + ShardedGradScaler, with
infinities and NaNs planted into one rank's gradient at chosen steps (a custom autograd
function on the first weight, so the plant lands before the framework reduces). Each rank
also computes its *local* gradient with a plain replica of the model on the same weights
and data. Recorded per step and rank: the local scaled gradients, the reduced scaled
gradients as the framework left them (DDP: every parameter; FSDP: the rank's shard of the
flat parameter), found_inf after ``unscale_``, the scale after ``update``.

    python scripts/record_dp_traces.py [--out tests/data/dp_traces.npz]

The tests (tests/dataparallel/test_dp_recorded.py) replay the local gradients through
``ampref.distributed.data_parallel_step`` and compare bit for bit; the live tests
(tests/dataparallel/test_dp_live.py) run the same scenarios through this module again.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
from typing import Any

import numpy as np

STEPS = 8
INIT_SCALE, GROWTH_INTERVAL = 2.0**10, 3


def plants(ranks: int) -> dict[tuple[int, int], tuple[int, float]]:
    """(step, rank) -> (flat index into the first weight's gradient, value)."""
    p = {(2, 1): (5, float("inf")), (5, 0): (17, float("-inf")),
         (6, ranks - 1): (300, float("nan"))}
    if ranks >= 4:
        p[(5, 3)] = (511, float("inf"))
    return p


#: name -> (wrapper, reduce dtype); the FSDP1 rows shard the flat parameter
SCENARIOS = {"ddp": ("ddp", "float32"), "ddp-fp16-hook": ("ddp", "float16"),
             "fsdp1": ("fsdp1", "float32"), "fsdp1-bf16-reduce": ("fsdp1", "bfloat16")}


def _model(torch: Any) -> Any:
    class Plant(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, w: Any, where: Any) -> Any:
            ctx.where = where
            return w.view_as(w)

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            if ctx.where is not None:
                g = g.clone()
                g.view(-1)[ctx.where[0]] = ctx.where[1]
            return g, None

    class MLP(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1 = torch.nn.Linear(16, 32)
            self.l2 = torch.nn.Linear(32, 4)
            self.where: Any = None

        def forward(self, x: Any) -> Any:
            w = Plant.apply(self.l1.weight, self.where)
            h = torch.tanh(torch.nn.functional.linear(x, w, self.l1.bias))
            return self.l2(h)

    return MLP


def _data(torch: Any, step: int, rank: int) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(8, 16, generator=g) * 4, torch.randn(8, 4, generator=g)


def _wrap(torch: Any, kind: str, model: Any, dtype: str) -> Any:
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        ddp = DDP(model)
        if dtype == "float16":  # (torch's bf16 hook needs CUDA/NCCL; the fp16 one runs on gloo)
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

            ddp.register_comm_hook(None, default_hooks.fp16_compress_hook)
        return ddp
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    from torch.distributed.fsdp import MixedPrecision, ShardingStrategy

    mp = MixedPrecision(reduce_dtype=torch.bfloat16) if dtype == "bfloat16" else None
    return FSDP(model, device_id=torch.device("cpu"), mixed_precision=mp,
                sharding_strategy=ShardingStrategy.FULL_SHARD, use_orig_params=False)


def _local_grads(torch: Any, replica: Any, wrapped: Any, x: Any, y: Any, scale: float) -> list[Any]:
    # the rank's own gradient on the current weights, before any reduction
    from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

    if isinstance(wrapped, FSDP):
        with FSDP.summon_full_params(wrapped):
            replica.load_state_dict({k: v.detach().clone() for k, v in
                                     wrapped.module.state_dict().items()})
    else:
        replica.load_state_dict(wrapped.module.state_dict())
    replica.zero_grad()
    (torch.nn.functional.mse_loss(replica(x), y) * scale).backward()
    return [p.grad.detach().numpy().copy() for p in replica.parameters()]


def _worker(rank: int, ranks: int, port: int, name: str, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    kind, dtype = SCENARIOS[name]
    torch.manual_seed(0)
    MLP = _model(torch)
    model, replica = MLP(), MLP()
    wrapped = _wrap(torch, kind, model, dtype)
    opt = torch.optim.SGD(wrapped.parameters(), lr=0.05)
    if kind == "ddp":
        scaler: Any = torch.amp.GradScaler("cpu", init_scale=INIT_SCALE,
                                           growth_interval=GROWTH_INTERVAL)
    else:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        scaler = ShardedGradScaler("cpu", init_scale=INIT_SCALE, growth_interval=GROWTH_INTERVAL)
    rec: dict[str, Any] = {}
    for s in range(STEPS):
        x, y = _data(torch, s, rank)
        where = plants(ranks).get((s, rank))
        model.where = replica.where = where
        scale = scaler.get_scale()
        local = _local_grads(torch, replica, wrapped, x, y, scale)
        opt.zero_grad()
        scaler.scale(torch.nn.functional.mse_loss(wrapped(x), y)).backward()
        reduced = [p.grad.detach().numpy().copy() for p in wrapped.parameters()]
        scaler.unscale_(opt)
        found = [float(v.item()) for v in
                 scaler._per_optimizer_states[id(opt)]["found_inf_per_device"].values()]
        scaler.step(opt)
        scaler.update()
        for i, g in enumerate(local):
            rec[f"s{s}/local/{i}"] = g
        for i, g in enumerate(reduced):
            rec[f"s{s}/reduced/{i}"] = g
        rec[f"s{s}/found_inf"] = np.array(found, dtype=np.float64)
        rec[f"s{s}/scale_before"] = np.array(scale)
        rec[f"s{s}/scale_after"] = np.array(scaler.get_scale())
    np.savez(os.path.join(out, f"{name}-{ranks}-{rank}.npz"), **rec)
    dist.destroy_process_group()


#: all-reduce vectors: ranks x lengths x dtypes (uneven chunks, empty chunks, 3 ranks)
AR_RANKS, AR_LENGTHS, AR_DTYPES = (3, 4), (1, 3, 10, 37, 1000, 4099), ("float32", "bfloat16",
                                                                        "float16")


def allreduce_input(rank: int, n: int, dtype: str) -> np.ndarray:
    """Rank ``rank``'s float32 input of the all-reduce vectors (exponents spread wide, so
    that the order of the additions shows in the bits)."""
    g = np.random.default_rng([rank, n, AR_DTYPES.index(dtype)])
    e = g.integers(-12, 12, size=n) if dtype != "float32" else g.integers(-30, 30, size=n)
    return (g.standard_normal(n) * 2.0**e).astype(np.float32)


def _allreduce_worker(rank: int, ranks: int, port: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    rec = {}
    for n in AR_LENGTHS:
        for dtype in AR_DTYPES:
            t = torch.from_numpy(allreduce_input(rank, n, dtype)).to(getattr(torch, dtype))
            dist.all_reduce(t)
            rec[f"{n}/{dtype}"] = t.float().numpy()
    if rank == 0:
        np.savez(os.path.join(out, "allreduce.npz"), **rec)
    dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spawn(target: Any, ranks: int, args: tuple[Any, ...], timeout: float,
           attempts: int = 3) -> None:
    """Run ``target(rank, ranks, port, *args)`` in ``ranks`` spawned processes.

    A launch whose workers die by a signal (gloo aborts when its rendezvous fails: the
    free port taken by another process between :func:`_free_port` and the bind, or a
    peer too slow on a loaded machine) is tried again on a fresh port, up to
    ``attempts`` launches; any other failure, and the last one, raises. Results are
    only ever read from a launch whose workers all exited 0."""
    import torch.multiprocessing as mp

    # spawned workers import this file by its module name: its folder must be on the
    # path they inherit (the tests load it from scripts/ by file location)
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    ctx = mp.get_context("spawn")
    for attempt in range(1, attempts + 1):
        port = _free_port()
        procs = [ctx.Process(target=target, args=(r, ranks, port, *args))
                 for r in range(ranks)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        bad = [p.exitcode for p in procs if p.exitcode != 0]
        if not bad:
            return
        signalled = all(code is not None and code < 0 for code in bad)
        if not signalled or attempt == attempts:
            raise RuntimeError(f"{target.__name__} with {ranks} ranks: worker exit codes "
                               f"{bad} (launch {attempt} of at most {attempts})")


def run(name: str, ranks: int, timeout: float = 120.0) -> list[dict[str, np.ndarray]]:
    """Run one scenario with ``ranks`` processes; the per-rank records."""
    with tempfile.TemporaryDirectory() as out:
        _spawn(_worker, ranks, (name, out), timeout)
        return [dict(np.load(os.path.join(out, f"{name}-{ranks}-{r}.npz")))
                for r in range(ranks)]


def run_allreduce(ranks: int, timeout: float = 120.0) -> dict[str, np.ndarray]:
    """gloo's all-reduce of :func:`allreduce_input` for every length and dtype."""
    with tempfile.TemporaryDirectory() as out:
        _spawn(_allreduce_worker, ranks, (out,), timeout)
        return dict(np.load(os.path.join(out, "allreduce.npz")))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="tests/data/dp_traces.npz")
    args = ap.parse_args(argv)
    import torch

    arrays: dict[str, np.ndarray] = {}
    for name in SCENARIOS:
        for ranks in (2, 4):
            for r, rec in enumerate(run(name, ranks)):
                arrays.update({f"{name}/{ranks}/r{r}/{k}": v for k, v in rec.items()})
            print(f"recorded {name} with {ranks} ranks", file=sys.stderr)
    for ranks in AR_RANKS:
        arrays.update({f"allreduce/{ranks}/{k}": v for k, v in run_allreduce(ranks).items()})
    meta = {"torch": torch.__version__, "steps": STEPS, "init_scale": INIT_SCALE,
            "growth_interval": GROWTH_INTERVAL, "scenarios": SCENARIOS,
            "plants": {str(n): {f"{s}@{r}": [i, str(v)] for (s, r), (i, v) in plants(n).items()}
                       for n in (2, 4)}}
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez_compressed(args.out, **arrays)
    print(f"wrote {args.out} ({len(arrays)} arrays)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
