#!/usr/bin/env bash
# One GPU check, at most 10 minutes on one NVIDIA GPU (the device tool's H100/H200):
# everything docs/gpu-validation.md reports, written under $OUT (else runs/gpu).
#
#   scripts/gpu_check.sh          (cwd: the checkout; python3 with torch and CuPy)
#
# 1. install ampref without fetching anything: a wheel carried in dist/ (built on the
#    host with `python -m build --wheel`), else the checkout without build isolation;
# 2. device.txt: the device, driver, Python, torch, CuPy, NumPy, numba;
# 3. gpu_tests.log + gpu_tests.xml: the GPU tests (CuPy kernels, the tensor-core chain,
#    cuBLAS within its bound, training on the device equal to the reference) and the
#    torch bridge's CUDA tests, from outside the checkout against the installed package
#    (the XML is what `ampref certify --import-results` takes as GPU evidence);
# 4. records.json + gemm_records.npz + autocast_traces.json (scripts/gpu_records.py):
#    every library GEMM flavour on operands never recorded, against cublas:<gpu>; cuBLAS
#    fp16/bf16 against the chain kernel on large shapes (up to 4096^3); torch's real CUDA
#    autocast traced op by op on the bridge's model zoo;
# 5. bench.txt: benchmarks/bench_device.py (device kernels against CuPy in one run), then
#    `ampref verify --backend cupy` over all 2^32 patterns of four fp16/bf16 cells
#    (FMT-VER-004; the device certificate's time);
# 6. train.txt: `python3 -m ampref train --backend cupy` final.npz hashes against the NumPy backend's,
#    both run here (the default model, 160 steps, fp32 / amp-fp16 / amp-bf16).
# Each step has its own time limit, cut to what is left of the whole check's budget
# (GPU_CHECK_BUDGET seconds, default 560: one call of the device tool may run 600 s); a
# step with under 15 s left is skipped and logged; a failing step is logged and the
# next one runs.
set -uo pipefail
budget=${GPU_CHECK_BUDGET:-560}
if ! [[ "$budget" =~ ^[0-9]+$ ]]; then
  echo "gpu_check: GPU_CHECK_BUDGET must be a whole number of seconds (default 560), got '$budget'"
  exit 2
fi
root=$(pwd)
out=$(realpath -m "${OUT:-runs/gpu}")
mkdir -p "$out"
gpu=$(python3 -c "import torch; n = torch.cuda.get_device_name().lower() if torch.cuda.is_available() else ''; print('h200' if 'h200' in n else 'h100')")
status=0
step() {  # step NAME SECONDS COMMAND...: run with a limit, log the exit status
  local name=$1 limit=$2; shift 2
  local left=$((budget - SECONDS - 5))
  if [ "$left" -lt 15 ]; then
    echo "== $name: skipped, ${left}s left of the ${budget}s budget"; status=1; return
  fi
  [ "$limit" -le "$left" ] || limit=$left
  echo "== $name (limit ${limit}s)"
  local t0=$SECONDS
  timeout "$limit" "$@"; local rc=$?
  echo "== $name: exit $rc after $((SECONDS - t0))s"
  [ "$rc" -eq 0 ] || status=1
}

{
  wheel=$(ls "$root"/dist/ampref-*.whl 2>/dev/null | tail -n 1)
  if [ -n "$wheel" ]; then
    python3 -m pip install --quiet --no-deps --force-reinstall "$wheel"
  else
    python3 -m pip install --quiet --no-deps --no-build-isolation "$root"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  (cd /tmp && python3 - <<'PY'
import platform, numpy, numba, torch
import ampref
print("python", platform.python_version(), "numpy", numpy.__version__, "numba", numba.__version__)
print("torch", torch.__version__, "cuda", torch.version.cuda)
try:
    import cupy
    print("cupy", cupy.__version__)
except ImportError as e:
    print("cupy: not importable:", e)
print("ampref from", ampref.__file__)
PY
  )
} > "$out/device.txt" 2>&1
cat "$out/device.txt"

cd /tmp
step "gpu tests" 240 env AMPREF_TEST_INSTALLED=1 python3 -m pytest -q -rs -p no:cacheprovider \
  --junitxml="$out/gpu_tests.xml" "$root/tests/backends/test_device_backend.py" \
  "$root/tests/backends/test_device_exact.py" \
  "$root/tests/bridge/test_cuda_calls.py" "$root/tests/bridge/test_nested_autocast.py" \
  "$root/tests/engine/test_devices.py" > "$out/gpu_tests.log" 2>&1
tail -n 3 "$out/gpu_tests.log"
step "records" 240 python3 "$root/scripts/gpu_records.py" --out "$out" --device cuda --gpu "$gpu" \
  --part gemm,chain,autocast
step "bench" 90 python3 "$root/benchmarks/bench_device.py" --n 4000000 --repeat 3 > "$out/bench.txt" 2>&1
{
  # FMT-VER-004 through the CLI (toward-zero: the matrix below has the nearest-even cells)
  for fmt in float16 bfloat16; do
    step "verify $fmt toward_zero on the device" 60 python3 -m ampref verify --backend cupy \
      --format "$fmt" --rounding toward_zero
  done
  # CRT-DEV-001: the exhaustive fp16/bf16 nearest-even cells as certificate chunks
  # (importable into a pack with ampref certify --import-results $out/certificates-device)
  step "device matrix fp16/bf16 nearest-even, all 2^32 inputs" 120 python3 -c "
import time
from ampref.certify import campaign
from ampref.certify.device_campaign import run_device
t = time.perf_counter()
cells = campaign.matrix(['float16', 'bfloat16'], roundings=['nearest_even'])
n = run_device(cells, '$out/certificates-device', 'cupy')
certs = campaign.certificates('$out/certificates-device')
print(f'device matrix: {len(certs)} cells, {n} chunks in {time.perf_counter() - t:.1f} s,',
      sum(c['checked'] for c in certs), 'inputs,', sum(c['mismatches'] for c in certs),
      'mismatches, all ok:', all(c['ok'] for c in certs))"
} >> "$out/bench.txt" 2>&1
tail -n 24 "$out/bench.txt"
{
  for mode in fp32 amp-fp16 amp-bf16; do
    for be in cupy numpy; do
      step "train $mode on $be" 120 python3 -m ampref train --backend "$be" --precision "$mode" --quiet \
        --no-report --out "/tmp/gpu-train-$be-$mode"
    done
    a=$(sha256sum < "/tmp/gpu-train-cupy-$mode/final.npz" | cut -c1-16)
    b=$(sha256sum < "/tmp/gpu-train-numpy-$mode/final.npz" | cut -c1-16)
    echo "train $mode: final.npz cupy $a numpy $b $([ "$a" = "$b" ] && echo EQUAL || echo DIFFERENT)"
    [ "$a" = "$b" ] || status=1
  done
} > "$out/train.txt" 2>&1
cat "$out/train.txt"
echo "gpu check: exit $status; files in $out"
exit "$status"
