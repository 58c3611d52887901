"""Replaying a multi-process torch data-parallel run (recorded in tests/data/dp_traces.npz
or run live by scripts/record_dp_traces.py) through ``ampref.distributed``: one set of
checks for the recorded and the live tests. A run is read through ``get(rank, step,
what)``, which returns the list of arrays stored under that rank, step and name
(``local``, ``reduced``, ``found_inf``, ``scale_before``, ``scale_after``)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ampref.distributed import DPStep, data_parallel_step, get_dp
from ampref.scaling.scaler import LossScaler
from ampref.testing import assert_bitwise_equal

Get = Callable[[int, int, str], list[np.ndarray]]

#: recorded scenario -> (ampref data-parallel semantics, reduce dtype)
SEMANTICS = {"ddp": ("torch-ddp", "float32"), "ddp-fp16-hook": ("torch-ddp", "float16"),
             "fsdp1": ("torch-fsdp1", "float32"),
             "fsdp1-bf16-reduce": ("torch-fsdp1", "bfloat16")}


def from_records(records: list[dict[str, np.ndarray]]) -> Get:
    """``get`` over per-rank dicts keyed ``s{step}/{what}/{i}`` (or ``s{step}/{what}``)."""
    def get(r: int, s: int, what: str) -> list[np.ndarray]:
        rec = records[r]
        if f"s{s}/{what}" in rec:
            return [rec[f"s{s}/{what}"]]
        prefix = f"s{s}/{what}/"
        keys = sorted((k for k in rec if k.startswith(prefix)),
                      key=lambda k: int(k.rsplit("/", 1)[1]))
        return [rec[k] for k in keys]
    return get


def replay(get: Get, name: str, ranks: int, s: int, order: str | None = None) -> DPStep:
    dp, dtype = SEMANTICS[name]
    sem = get_dp(dp)
    if order is not None:
        from dataclasses import replace

        sem = replace(sem, order=order)
    local = [get(r, s, "local") for r in range(ranks)]
    return data_parallel_step(local, sem, reduce_dtype=dtype, first_iteration=s == 0)


def reduced_mismatch(get: Get, name: str, ranks: int, s: int, got: DPStep) -> str | None:
    """None when ``got`` holds torch's reduced gradients bit for bit, else the message."""
    try:
        if name.startswith("ddp"):  # every rank holds every reduced gradient
            for r in range(ranks):
                for i, want in enumerate(get(r, s, "reduced")):
                    assert_bitwise_equal(got.reduced[i], want, nan="any",
                                         msg=f"{name} N={ranks} step {s} rank {r} param {i}")
        else:  # FSDP: rank r holds its shard of the padded flat gradient
            flat = np.concatenate([g.reshape(-1) for g in got.reduced])
            want = np.concatenate([get(r, s, "reduced")[0] for r in range(ranks)])[:flat.size]
            assert_bitwise_equal(flat, want, nan="any", msg=f"{name} N={ranks} step {s}")
    except AssertionError as e:
        return str(e)
    return None


def check_run(get: Get, name: str, ranks: int, steps: int, init_scale: float,
              growth_interval: int) -> None:
    """Reduced gradients, found_inf on every rank and the scale after every step equal
    torch's (the scale through ampref's torch loss-scale profile)."""
    sc = LossScaler.from_profile("torch", init_scale=init_scale, growth_interval=growth_interval)
    for s in range(steps):
        got = replay(get, name, ranks, s)
        bad = reduced_mismatch(get, name, ranks, s, got)
        assert bad is None, bad
        want = tuple(float(get(r, s, "found_inf")[0][0]) for r in range(ranks))
        assert got.found_inf == want, f"{name} N={ranks} step {s}: {got.found_inf} != {want}"
        for r in range(ranks):
            assert float(get(r, s, "scale_before")[0]) == sc.scale
        assert sc.update(found_inf=got.skip) == (not got.skip)
        for r in range(ranks):
            want_scale = np.float32(get(r, s, "scale_after")[0])
            assert np.float32(sc.scale).view(np.uint32) == want_scale.view(np.uint32), \
                f"{name} N={ranks} step {s} rank {r}: scale {sc.scale} != torch {want_scale}"
