"""Pack the real-GPU tensor-core dumps into tests/data/tensorcore_dumps.npz.

Source: the model_validation/ dumps of north-numerical-computing/MATLAB-tensor-core
(BSD-2-Clause, (c) F. A. Khattak and M. Mikaitis; licence copied to
tests/data/tensorcore_dumps.LICENCE), unpacked into a folder. Usage:

    python scripts/pack_tensorcore_dumps.py path/to/tensor-core-dumps

Arrays per experiment ``GPU_INPUT_OUT``: ``/a``, ``/b`` (rows x K, float32 values that
are exact in INPUT), ``/c`` (float32 addend as recorded), ``/d`` (GPU result, float32;
fp16 results widened exactly). Stored as uint32 bit patterns so nothing is reinterpreted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np


def load_hex_rows(path: Path) -> np.ndarray:
    return np.array([[int(w, 16) for w in line.split()] for line in path.read_text().splitlines()
                     if line.strip()], dtype=np.uint32)


def load_bin(path: Path) -> np.ndarray:
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip()]
    return np.array([int(line, 2) for line in lines], dtype=np.uint32)


def main() -> None:
    if len(sys.argv) != 2:
        raise SystemExit("usage: python scripts/pack_tensorcore_dumps.py path/to/tensor-core-dumps")
    root = Path(sys.argv[1])
    out: dict[str, np.ndarray] = {}
    for gpu_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        gpu = gpu_dir.name
        for fmt_dir in sorted(p for p in gpu_dir.iterdir() if p.is_dir()):
            fmt = fmt_dir.name
            a = load_hex_rows(fmt_dir / f"a_{gpu}_{fmt}.txt")
            b = load_hex_rows(fmt_dir / f"b_{gpu}_{fmt}.txt")
            c = load_bin(fmt_dir / f"c_{gpu}_fp32.txt")
            for res in ("fp32", "fp16"):
                dpath = fmt_dir / f"d_{gpu}_{res}.txt"
                if dpath.exists():
                    key = f"{gpu}_{fmt}_{res}"
                    out[f"{key}/a"], out[f"{key}/b"], out[f"{key}/c"] = a, b, c
                    out[f"{key}/d"] = load_bin(dpath)
    dest = Path(__file__).resolve().parents[1] / "tests" / "data" / "tensorcore_dumps.npz"
    np.savez_compressed(dest, **out)
    (dest.parent / "tensorcore_dumps.LICENCE").write_text((root / "LICENCE").read_text())
    print(f"wrote {dest} ({dest.stat().st_size / 1e6:.1f} MB, {len(out) // 4} experiments)")


if __name__ == "__main__":
    main()
