"""Every Python code block of the README runs on its own (each carries its imports)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

README = ROOT / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 5


@pytest.mark.parametrize("i", range(len(BLOCKS)))
def test_readme_python_block_runs_by_itself(i: int, tmp_path: Path) -> None:
    if "import torch" in BLOCKS[i]:
        pytest.importorskip("torch")  # the ampref[torch] extra
    r = subprocess.run([sys.executable, "-c", BLOCKS[i]], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300, check=False)
    assert r.returncode == 0, f"README python block {i} failed:\n{BLOCKS[i]}\n{r.stderr[-2000:]}"
