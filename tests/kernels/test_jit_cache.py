"""numba's disk cache never serves stale kernels (KRN-CCH-001): a compiled kernel's cache
entry is stamped with every source of ``ampref/kernels``, so editing a module that other
kernels inline makes the next process compile afresh. Tested on a copy of the kernels
room (it imports only NumPy and numba) in a temporary folder, as issue 38 asks: run,
edit the inlined module, run again, compare with a run that does not cache at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")

from ampref.kernels import jitcache  # noqa: E402

ROOM = Path(jitcache.__file__).parent
# a constant general_numba's stochastic-rounding hash uses; numba freezes module globals
# into the machine code of every kernel that inlines the hash (encode_numba's blocks)
ANCHOR = "_M32 = np.uint64(0xFFFFFFFF)"
EDITED = "_M32 = np.uint64(0x7FFFFFFF)"

SCRIPT = """
import json, sys
import numpy as np
from kcopy import encode_numba, jitcache, params
from ampref.formats.table import get_format
x = np.linspace(-3.0, 3.0, 4097, dtype=np.float32)
codes, _ = encode_numba.encode_bits(x, get_format("bfloat16").spec, params.STOCHASTIC,
                                    False, True, 1234)
hits = sum(sum(d.stats.cache_hits.values()) for d in (encode_numba._encode_blocks,))
print(json.dumps({"codes": codes.astype(int).tolist(), "hits": hits,
                  "cache": jitcache.CACHE}))
"""


def _run(root: Path, cache: bool) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["PYTHONPATH"] = str(root) + os.pathsep + env.get("PYTHONPATH", "")
    env["AMPREF_NUMBA_CACHE"] = "1" if cache else "0"
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=root, env=env,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture
def room_copy(tmp_path: Path) -> Path:
    shutil.copytree(ROOM, tmp_path / "kcopy", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.mark.clause("KRN-CCH-001")
def test_editing_an_inlined_module_recompiles_the_kernels_that_inline_it(
        room_copy: Path) -> None:
    """Inputs: a copy of ampref/kernels; 4097 float32 values in [-3, 3] stochastically
    rounded to bf16 (seed 1234) by ``encode_numba``, whose block loop inlines
    ``general_numba``'s hash. Runs: (1) cold, (2) warm, then ``general_numba``'s 32-bit
    mask constant is edited to 31 bits, (3) with the warm cache, (4) with caching off.
    Expected: run 2 loads from the cache (hits > 0) with run 1's codes; run 3 gives run
    4's codes (the edit took effect) and they differ from run 1's. Pass: all three."""
    cold = _run(room_copy, cache=True)
    warm = _run(room_copy, cache=True)
    assert cold["cache"] is True and warm["hits"], f"no cache hit on the second run: {warm}"
    assert warm["codes"] == cold["codes"]
    source = room_copy / "kcopy" / "general_numba.py"
    text = source.read_text()
    assert ANCHOR in text, f"test anchor {ANCHOR!r} is gone from general_numba.py: update it"
    source.write_text(text.replace(ANCHOR, EDITED, 1))
    after_edit = _run(room_copy, cache=True)
    uncached = _run(room_copy, cache=False)
    assert uncached["codes"] != cold["codes"], "the edit should change stochastic rounding"
    bad = np.flatnonzero(np.array(after_edit["codes"]) != np.array(uncached["codes"]))
    assert bad.size == 0, (f"stale compiled code served after editing general_numba.py: "
                           f"{bad.size} codes differ from a fresh compile")


@pytest.mark.clause("KRN-CCH-001")
def test_every_compiled_kernel_module_caches_through_the_stamped_locator() -> None:
    """Inputs: the text of every ``*_numba.py`` in ampref/kernels. Expected: none asks
    numba for ``cache=True`` directly (that would bypass the all-sources stamp); each uses
    ``cache=CACHE`` from ``jitcache``. Pass: no direct ``cache=True`` in any module."""
    offenders = [p.name for p in ROOM.glob("*_numba.py") if "cache=True" in p.read_text()]
    assert not offenders, f"cache=True bypasses jitcache's stamp in {offenders}"
    assert all("cache=CACHE" in p.read_text() for p in ROOM.glob("*_numba.py"))


@pytest.mark.clause("KRN-CCH-001")
def test_the_stamp_changes_with_any_kernel_source_and_only_then(tmp_path: Path) -> None:
    """Inputs: the digest of ampref/kernels now, again, and of a copy with one byte
    appended to ``bits.py``. Expected: equal, equal, different. Pass: as stated."""
    assert jitcache.sources_digest() == jitcache.sources_digest()
    copy = tmp_path / "k"
    shutil.copytree(ROOM, copy, ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    code = "from k import jitcache; print(jitcache.sources_digest())"
    before = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert before == jitcache.sources_digest()
    with open(copy / "bits.py", "a") as fh:
        fh.write("\n")
    after = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert after != before
