#!/usr/bin/env bash
# Run every GPU-dependent test of the CuPy backend on a machine with an NVIDIA device and
# write the log and a short JSON summary (for the device tool: OUT=$OUT, else ./runs/gpu).
# Usage: scripts/gpu_check.sh            (needs CuPy importable and a CUDA device)
set -uo pipefail
out="${OUT:-runs/gpu}"
mkdir -p "$out"
python3 - <<'PY' 2>&1 | tee "$out/device.txt"
import cupy, sys
print("cupy", cupy.__version__, "devices", cupy.cuda.runtime.getDeviceCount())
p = cupy.cuda.runtime.getDeviceProperties(0)
print("device", p["name"].decode(), "cc", p["major"], p["minor"])
print("python", sys.version.split()[0])
PY
python3 -m pytest -q -rs -p no:cacheprovider tests/backends/test_device_backend.py 2>&1 | tee "$out/gpu_tests.log"
status=${PIPESTATUS[0]}
echo "exit status $status" | tee -a "$out/gpu_tests.log"
exit "$status"
