"""Data-parallel emulation against live multi-process torch runs: the recorder
(``scripts/record_dp_traces.py``) spawns 2 and 4 gloo processes on localhost running
DDP + GradScaler and FSDP1 + ShardedGradScaler with planted overflows, and the same
checks as the recorded test run on what they return (skipped without torch)."""

from __future__ import annotations

import importlib
import sys

import pytest

from dp_replay import check_run, from_records
from paths import ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("torch.distributed")

# imported by name (not from a file location): the spawned workers unpickle its functions
# by module name, so it must be the very module sys.modules holds
if str(ROOT / "scripts") not in sys.path:
    sys.path.insert(0, str(ROOT / "scripts"))
recorder = importlib.import_module("record_dp_traces")


@pytest.mark.clause("DPL-CNF-002")
@pytest.mark.parametrize("ranks", [2, 4])
@pytest.mark.parametrize("name", ["ddp", "fsdp1"])
def test_a_live_gloo_run_matches_the_emulation(name: str, ranks: int) -> None:
    """Inputs: a live torch gloo run of DDP and FSDP1 with 2 and 4 ranks (the recorder's
    model, planted overflows). Expected: reduced gradients, found_inf and scales equal the
    emulation. Pass: check_run finds no difference."""
    if not torch.distributed.is_available() or not torch.distributed.is_gloo_available():
        pytest.skip("this torch build has no gloo backend")
    records = recorder.run(name, ranks, timeout=180.0)
    check_run(from_records(records), name, ranks, recorder.STEPS, recorder.INIT_SCALE,
              recorder.GROWTH_INTERVAL)
