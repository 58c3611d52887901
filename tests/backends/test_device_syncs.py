"""Host synchronisations of the device backend (BKD-SYN-001), counted on the strict CuPy
stand-in: every transfer to the host, scalar conversion and data-sized result (boolean
mask, ``unique``, ``nonzero``) is one (``strictxp.on_sync``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest
import strictxp
from strict_kernels import strict_device

import ampref
import ampref.engine.functional as F
from ampref.backends.device import DeviceBackend

BACKEND = "cupy-host-syncs"


@pytest.fixture(scope="module")
def device() -> DeviceBackend:
    return strict_device(BACKEND)


def _syncs(run: Any) -> Counter[str]:
    """The function names of the ampref frames that synchronised while ``run()`` ran."""
    seen: Counter[str] = Counter()
    with strictxp.on_sync(lambda site: seen.update([site.split()[-1]])):
        run()
    return seen


#: each mode's designed reads: the scaler's row, the loss, the gradient counts and the
#: rounding statistics (only where gradients are rounded to a 16-bit format)
DESIGNED = {"fp32": {"item", "_grad_counts"},
            "amp-bf16": {"item", "_grad_counts", "layers"},
            "amp-fp16": {"scaler_update", "item", "_grad_counts", "layers"}}


@pytest.mark.clause("BKD-SYN-001")
@pytest.mark.parametrize("mode", sorted(DESIGNED))
def test_a_training_step_reads_the_device_only_for_its_designed_reads(device: DeviceBackend,
                                                                      mode: str) -> None:
    """Inputs: the third step of a small model (width 32, 2 heads, context 32, batch 4: the
    attention scores have 8192 > 2^12 elements, past the fused sum) in ``mode``
    on the device backend with host-built kernels. Expected: one synchronisation each
    at the designed reads of DESIGNED[mode] (scaler_update, item, _grad_counts, layers)
    and none elsewhere (ids and targets are host arrays; no sum falls back to the
    certification passes). Pass: the counter of synchronising sites equals one of each."""
    from ampref.training.config import TrainConfig
    from ampref.training.corpus import Corpus, load_corpus
    from ampref.training.run import Run

    cfg = TrainConfig(precision=mode, steps=6, batch=4, context=32, width=32, heads=2,
                      backend=BACKEND)
    run = Run(cfg, Corpus(load_corpus(None), cfg.context))
    run.step()
    run.step()
    got = _syncs(run.step)
    assert got == Counter(DESIGNED[mode]), f"{mode}: synchronised at {dict(got)}"


def _lm_loss(be: str, ids: Any, targets: Any) -> tuple[Any, Any, Any]:
    """An embedding and cross_entropy (with ignored targets) forward and backward: the
    loss and the two gradients as the backend's arrays."""
    rng = np.random.default_rng(3)
    emb = ampref.tensor(rng.standard_normal((11, 6)), requires_grad=True, backend=be)
    head = ampref.tensor(rng.standard_normal((6, 11)), requires_grad=True, backend=be)
    loss = F.cross_entropy(F.matmul(F.embedding(ids, emb), head), targets, ignore_index=-1)
    loss.backward()
    return loss.data, emb.grad.data, head.grad.data


#: repeated ids (grouped sums) and ignored targets (masked rows)
IDS = np.array([[3, 1, 3, 10, 0], [1, 1, 7, 3, 2]])
TARGETS = np.array([[1, -1, 4, 10, 3], [-1, 0, 0, 5, -1]])


@pytest.mark.clause("BKD-SYN-001", "BKD-RED-002")
def test_host_ids_and_targets_cost_no_synchronisation_and_give_the_reference_bits(
        device: DeviceBackend) -> None:
    """Inputs: embedding(IDS) @ head, cross_entropy against TARGETS (repeated ids,
    ignore_index -1 on three rows), forward and backward, ids and targets as NumPy
    arrays. Expected: no synchronisation, and loss and both gradients bitwise those of
    the NumPy backend. Pass: zero synchronisations; equal uint32 words (hex on failure)."""
    got: list[Any] = []
    syncs = _syncs(lambda: got.extend(_lm_loss(BACKEND, IDS, TARGETS)))
    assert not syncs, f"synchronised at {dict(syncs)}"
    want = _lm_loss("numpy", IDS, TARGETS)
    for name, g, w in zip(("loss", "embedding grad", "head grad"), got, want, strict=True):
        gw = np.asarray(device.to_numpy(g), np.float32).view(np.uint32)
        ww = np.asarray(w, np.float32).view(np.uint32)
        bad = np.flatnonzero(gw.reshape(-1) != ww.reshape(-1))
        assert not bad.size, (f"{name}: {bad.size} words differ, first "
                              f"{gw.reshape(-1)[bad[0]]:08x} want {ww.reshape(-1)[bad[0]]:08x}")


@pytest.mark.clause("BKD-SYN-001")
def test_device_ids_and_targets_cost_one_transfer_each(device: DeviceBackend) -> None:
    """Inputs: the same loss with ids and targets given as device arrays. Expected: two
    synchronisations, the one transfer of each operand (``host_index``, called by
    embedding and cross_entropy; their checks run on the host copy). Pass: the counter
    equals {host_index: 2}."""
    syncs = _syncs(lambda: _lm_loss(BACKEND, strictxp.asarray(IDS), strictxp.asarray(TARGETS)))
    assert syncs == Counter({"host_index": 2}), dict(syncs)


@pytest.mark.clause("BKD-SYN-001")
def test_bad_device_targets_are_named_after_their_one_transfer(device: DeviceBackend) -> None:
    """Inputs: device targets with 11 (the vocabulary is 0..10) and device ids with -2.
    Expected: ValueError naming the allowed range and the range found. Pass: both
    messages match."""
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 11\).*got range \[0, 11\]"):
        _lm_loss(BACKEND, IDS, strictxp.asarray(np.where(TARGETS == 10, 11, TARGETS)))
    with pytest.raises(ValueError, match=r"ids must lie in \[0, 11\), got range \[-2, 10\]"):
        _lm_loss(BACKEND, strictxp.asarray(np.where(IDS == 0, -2, IDS)), TARGETS)


def _phases_gemm_syncs(device: DeviceBackend, a: np.ndarray, b: np.ndarray) -> tuple[int, Any]:
    """Synchronisations of one exact GEMM through the specification's phases (the
    ``numpy`` kernel switch, as GEMMs past FUSED_EXACT_LIMITS run), and its result."""
    seen: list[str] = []
    with ampref.use_kernels("numpy"), strictxp.on_sync(seen.append):
        out = device.matmul(strictxp.asarray(a), strictxp.asarray(b))
    return len(seen), device.to_numpy(out)


@pytest.mark.clause("BKD-SYN-001", "BKD-MM-001")
@pytest.mark.parametrize("rows", [1, 3, 40])
def test_the_exact_gemm_phases_read_the_device_a_fixed_number_of_times(
        device: DeviceBackend, rows: int) -> None:
    """Inputs: ``rows`` rows [1, 2^-24, 2^-80] times a column of ones on the device
    backend's phase path: every element's float64 sum lands on the float32 tie
    1 + 2^-24, so every element goes through the range tests, the certification, the
    compensated refinement and the integer fallback; and an fp16-valued GEMM (exact by
    range). Expected: fl32(1 + 2^-24 + 2^-80) = 1 + 2^-23 (0x3f800001, the rational
    value rounded once) in every element; the tie GEMM's synchronisations the same for
    every ``rows`` (batched reads, not one per undecided element), at most 8; the
    exact-by-range GEMM one. Pass: words equal; counts as stated."""
    a = np.tile(np.array([1.0, 2.0**-24, 2.0**-80], np.float32), (rows, 1))
    n, out = _phases_gemm_syncs(device, a, np.ones((3, 2), np.float32))
    words = np.asarray(out, np.float32).view(np.uint32)
    assert np.all(words == 0x3F800001), f"got {words.ravel()[0]:08x}, want 3f800001"
    n_one, _ = _phases_gemm_syncs(device, a[:1], np.ones((3, 2), np.float32))
    assert n == n_one <= 8, f"{rows} rows: {n} synchronisations, 1 row: {n_one}"
    n_range, _ = _phases_gemm_syncs(device, np.ones((4, 8), np.float32),
                                    np.ones((8, 3), np.float32))
    assert n_range == 1, f"exact by range: {n_range} synchronisations"
