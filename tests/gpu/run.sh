#!/usr/bin/env bash
# The GPU check in one device call: build twin and test_gpu, run the gpu-labelled tests, calibrate
# every local GPU, then check the profile against independent PyTorch measurements of GEMM shapes and
# collective sizes calibration did not measure (tests/gpu/check_profile.py). Logs and tables go to
# $OUT (or out/gpu-check): run.log, ctest.log, calibrate.log, profile.json, check.csv, check.md.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/gpu-check}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
status=0

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
nvidia-smi topo -m || true
nvcc --version | tail -1; cmake --version | head -1; nproc

# CLI11 is header-only; where the machine lacks libcli11-dev, the headers travel in build-cli11/.
extra_flags=""
if [ ! -f /usr/include/CLI/CLI.hpp ] && [ -f build-cli11/CLI/CLI.hpp ]; then
  extra_flags="-isystem $PWD/build-cli11"; echo "using carried CLI11 headers"
fi

step "build"
build=build-device
SECONDS=0
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTWIN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20 \
  -DCMAKE_CXX_FLAGS="$extra_flags" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
cmake --build "$build" --target twin test_gpu -j "$(nproc)" 2>&1 | grep -E "error|Error|Linking" || true
[ -x "$build/twin" ] && [ -x "$build/tests/test_gpu" ] || { echo "build failed"; exit 1; }
echo "build: ${SECONDS}s"

step "ctest -L gpu"
(cd "$build" && ctest -L gpu --output-on-failure --timeout 300) > "$OUT/ctest.log" 2>&1 || status=1
tail -15 "$OUT/ctest.log"

step "twin calibrate (all GPUs)"
SECONDS=0
"$build/twin" calibrate --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1 || status=1
echo "calibrate: ${SECONDS}s wall"
grep -E "TFLOP/s|busbw|overlap|usable|wrote|error" "$OUT/calibrate.log" | grep -vE "^.*GEMM [0-9]+/" | tail -40
grep -E "GEMM [0-9]+/" "$OUT/calibrate.log" | sort -t, -k2 | tail -5

step "no-GPU message"
CUDA_VISIBLE_DEVICES="" "$build/twin" calibrate --out /tmp/none.json; echo "exit code $? (non-zero expected)"
[ ! -e /tmp/none.json ] && echo "no profile written: ok"

step "interrupted calibration leaves no profile"
"$build/twin" calibrate --quick --out /tmp/interrupted.json > /tmp/interrupted.log 2>&1 &
pid=$!; sleep 12; kill -INT $pid; wait $pid; echo "exit code $?"
ls /tmp/interrupted.json* 2>/dev/null || echo "no profile or temp file: ok"

if [ -f "$OUT/profile.json" ]; then
  step "independent check (PyTorch)"
  python3 tests/gpu/check_profile.py "$OUT/profile.json" "$OUT" || status=1
fi
step "done: status $status"
exit $status
