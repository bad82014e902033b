#!/usr/bin/env bash
# The GPU check in one device call: build twin and test_gpu, run the gpu-labelled tests, calibrate
# every local GPU, then check the profile against fresh measurements, in a separate run of the same
# harnesses, of GEMM shapes and collective sizes calibration did not measure (`twin calibrate --check`);
# then twin execute: every strategy against the single-GPU loss curve, speed, scaling and faults.
# Logs and tables go to $OUT (or out/gpu-check): run.log, ctest.log, calibrate.log, profile.json,
# check.log, check.csv, check.md.
# TWIN_GPU_STEPS picks steps (default: all but accuracy and check-sweep): tests calibrate calibrate-checks check
# check-sweep execute moe context strands hot-switch per-layer per-layer-layouts hot-switch-layouts asymmetric mpirun
# accuracy (context, per-layer-layouts and hot-switch-layouts: two GPUs or more; asymmetric: four);
# `accuracy` runs issue 5's study on as many GPUs as the machine has (scenarios/accuracy-llama2-7b-<N>xH200.json,
# or TWIN_ACCURACY_SCENARIO) with this call's profile. TWIN_PROFILE=FILE skips calibration and checks that profile instead.
# TWIN_CALIBRATE_SCENARIO=S.json makes calibration also measure the exact shapes of S's candidates.
# TWIN_GPU_TEST_FILTER=PATTERN runs only those GPU tests (a gtest filter).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT="${OUT:-out/gpu-check}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run.log") 2>&1
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"  # the user's value wins, as in twin's launcher
step() { echo; echo "=== $* ($(date -u +%H:%M:%S))"; }
status=0
steps="${TWIN_GPU_STEPS:-tests calibrate calibrate-checks check execute moe context strands hot-switch per-layer per-layer-layouts hot-switch-layouts asymmetric mpirun}"
wants() { [[ " $steps " == *" $1 "* ]]; }
gpus=$(nvidia-smi -L | wc -l)
# The machine's GPU as the scenarios name it, and the shipped profiles measured on one such GPU and on as many as a
# check here uses (two H200s: h200-x2, whose NVLink collectives price the transfers; H100s have one profile).
gpu_name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu_name" in
  *H100*) scenario_gpu=H100-SXM-80GB; one_gpu_profile=h100-x1; machine_profile=h100-x1 ;;
  *) scenario_gpu=H200-141GB; one_gpu_profile=h200-x1; machine_profile=h200-x1
     [ "$gpus" -ge 2 ] && machine_profile=h200-x2 ;;
esac
# Runs tests/gpu/STEM.py with the scenarios' GPU and PROFILE (and further arguments): its log, tables and numbers
# under $OUT, its run folders (traces left out) as STEM-runs.tar.gz there.
run_check() {
  local stem=$1 profile=$2 folder=/tmp/${1//_/-}
  shift 2
  python3 tests/gpu/$stem.py --twin "$twin" --out "$folder" --gpus "$gpus" --gpu "$scenario_gpu" --profile "$profile" \
    "$@" > "$OUT/$stem.log" 2>&1 || status=1
  cp "$folder/$stem.md" "$folder/$stem.json" "$OUT/" 2>/dev/null && cat "$OUT/$stem.md"
  tar czf "$OUT/${stem%_check}-runs.tar.gz" --exclude=traces -C /tmp "${folder#/tmp/}" 2>/dev/null
}

# run_check where the machine has two GPUs or more (its wall time printed), else a line saying why not.
run_multi_gpu_check() {
  local stem=$1 profile=$2 what=$3
  SECONDS=0
  if [ "$gpus" -ge 2 ]; then
    run_check "$stem" "$profile"
  else
    echo "$what needs two GPUs; this machine has $gpus (skipped)"
  fi
  echo "$what checks: ${SECONDS}s wall"
}

step "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
# SM clock, power and temperature every 200 ms for the whole call (read only): what the GPU ran at when a
# measurement moved.
nvidia-smi --query-gpu=index,timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
  --format=csv -lms 200 > "$OUT/gpu_clocks.csv" 2>/dev/null &
clock_logger=$!
trap 'kill $clock_logger 2>/dev/null' EXIT
nvidia-smi topo -m || true
nvcc --version | tail -1; cmake --version | head -1; nproc

# CLI11 is header-only; where the machine lacks libcli11-dev, the headers travel in build-cli11/.
extra_flags=""
if [ ! -f /usr/include/CLI/CLI.hpp ] && [ -f build-cli11/CLI/CLI.hpp ]; then
  extra_flags="-isystem $PWD/build-cli11"; echo "using carried CLI11 headers"
fi

step "build"
SECONDS=0
# twin runs its GPU commands in twin-gpu beside it (cli/gpu_binary.hpp): both travel.
# test_gpu need not travel when no step runs it (a carry without it rebuilt everything here, ~130 s, until 2026-12-01).
if [ -x build-carry/twin ] && [ -x build-carry/twin-gpu ] && { [ -x build-carry/test_gpu ] || ! wants tests; }; then
  # Binaries built on the workstation (same x86-64, CUDA 13.0) with spdlog/fmt beside them: the device
  # image lacks some -dev packages (no Boost.Graph CMake config on 2026-11-21) and this saves the build.
  echo "using carried binaries in build-carry/"
  twin=build-carry/twin; test_gpu=build-carry/test_gpu
  export LD_LIBRARY_PATH="$PWD/build-carry/lib:${LD_LIBRARY_PATH:-}"
else
  build=build-device
  # Boost.Graph is header-only for twin; where its CMake config is missing, name the headers as the target.
  shim="$build/boost-graph-shim"; mkdir -p "$shim"
  boost_version=$(ls -d /usr/lib/x86_64-linux-gnu/cmake/Boost-* 2>/dev/null | head -1 | sed 's/.*Boost-//')
  printf 'set(PACKAGE_VERSION "%s")\nset(PACKAGE_VERSION_COMPATIBLE TRUE)\nset(PACKAGE_VERSION_EXACT TRUE)\n' \
    "$boost_version" > "$shim/boost_graph-config-version.cmake"
  printf 'if(NOT TARGET Boost::graph)\n  add_library(Boost::graph INTERFACE IMPORTED)\n  target_link_libraries(Boost::graph INTERFACE Boost::headers)\nendif()\n' \
    > "$shim/boost_graph-config.cmake"
  shim_flag=""; [ -n "$(ls /usr/lib/x86_64-linux-gnu/cmake/boost_graph-* 2>/dev/null)" ] || shim_flag="-Dboost_graph_DIR=$PWD/$shim"
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTWIN_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 $shim_flag \
    -DCMAKE_CUDA20_STANDARD_COMPILE_OPTION=-std=c++20 -DCMAKE_CUDA20_EXTENSION_COMPILE_OPTION=-std=c++20 \
    -DCMAKE_CXX_FLAGS="$extra_flags" > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  cmake --build "$build" --target twin twin-gpu test_gpu -j "$(nproc)" 2>&1 | grep -E "error|Error|Linking" || true
  twin=$build/twin; test_gpu=$build/tests/test_gpu
  [ -x "$twin" ] && [ -x "$test_gpu" ] || { echo "build failed"; exit 1; }
fi
echo "build: ${SECONDS}s"

if wants tests; then
step "GPU tests (test_gpu: what ctest -L gpu runs)"
"$test_gpu" ${TWIN_GPU_TEST_FILTER:+--gtest_filter=$TWIN_GPU_TEST_FILTER} > "$OUT/ctest.log" 2>&1 || status=1
tail -15 "$OUT/ctest.log"
fi

if [ -n "${TWIN_PROFILE:-}" ]; then
  cp "$TWIN_PROFILE" "$OUT/profile.json"; echo "profile: $TWIN_PROFILE"
elif wants calibrate; then
step "twin calibrate (all GPUs)"
SECONDS=0
scenario_flag=""; [ -n "${TWIN_CALIBRATE_SCENARIO:-}" ] && scenario_flag="--scenario $TWIN_CALIBRATE_SCENARIO"
"$twin" calibrate $scenario_flag --out "$OUT/profile.json" > "$OUT/calibrate.log" 2>&1 || status=1
echo "calibrate: ${SECONDS}s wall"
grep -E "TFLOP/s|busbw|overlap|usable|wrote|agree|GEMMs 100|error" "$OUT/calibrate.log" | tail -40
# GEMMs are timed in batches with a progress line, not a line per timing (issue 43): the profile says the rest.
python3 -c 'import json, sys; p = json.load(open(sys.argv[1]))["provenance"]
print("GEMM shapes measured:", p["gemm_shapes_measured"], "fastest:", round(p["gemm_best_tflops"]), "TFLOP/s")' \
  "$OUT/profile.json" 2>/dev/null
fi

if wants accuracy && [ -f "$OUT/profile.json" ]; then
  step "issue 5's accuracy study on $gpus GPU(s) (tests/gpu/accuracy_study.py)"
  SECONDS=0
  export PYTHONUNBUFFERED=1
  scenario="${TWIN_ACCURACY_SCENARIO:-scenarios/accuracy-llama2-7b-${gpus}xH200.json}"
  python3 tests/gpu/accuracy_study.py --twin "$twin" --phase all --scenario "$scenario" \
    --profile "$OUT/profile.json" --work "out/$(basename "$scenario" .json)" --results "$OUT" --pack "$OUT/accuracy-work.tar.gz" \
    --budget-s "${TWIN_ACCURACY_BUDGET_S:-420}" > "$OUT/accuracy.log" 2>&1 || status=1
  grep -E "exit|budget" "$OUT/accuracy.log" | tail -20; head -12 "$OUT/accuracy.md" 2>/dev/null
  echo "accuracy study: ${SECONDS}s wall"
fi

if wants calibrate-checks; then
step "no-GPU message"
CUDA_VISIBLE_DEVICES="" "$twin" calibrate --out /tmp/none.json; echo "exit code $? (non-zero expected)"
[ ! -e /tmp/none.json ] && echo "no profile written: ok"

step "interrupted calibration leaves no profile"
rm -f /tmp/interrupted.json*
"$twin" calibrate --out /tmp/interrupted.json > /tmp/interrupted.log 2>&1 &
# SIGTERM, not SIGINT: a background job of a non-interactive shell ignores SIGINT.
pid=$!; sleep 3; kill -TERM $pid; wait $pid; echo "exit code $? (non-zero expected)"
ls /tmp/interrupted.json* 2>/dev/null || echo "no profile or temp file: ok"
fi

if wants check && [ -f "$OUT/profile.json" ]; then
  step "independent check: twin calibrate --check (GEMMs off the grid, collectives between measured sizes)"
  SECONDS=0
  "$twin" calibrate --check "$OUT/profile.json" --check-out "$OUT" > "$OUT/check.log" 2>&1 || status=1
  echo "check: ${SECONDS}s wall"
  grep -E "error|\[check\]" "$OUT/check.log" | head -5
  cat "$OUT/check.md" 2>/dev/null || tail -20 "$OUT/check.log"
fi
if wants check-sweep && [ -f "$OUT/profile.json" ]; then
  # Sweeps of K, N and M between grid sizes (tests/gpu/gemm_sweep.json): where the kernel cuBLASLt
  # picks, or its tiles, leave the interpolation between the grid's half octaves.
  step "GEMM sweeps between grid sizes: twin calibrate --check --check-gemms tests/gpu/gemm_sweep.json"
  SECONDS=0
  "$twin" calibrate --check "$OUT/profile.json" --check-gemms tests/gpu/gemm_sweep.json --check-out "$OUT/sweep" \
    > "$OUT/sweep.log" 2>&1
  echo "sweep: exit $?, ${SECONDS}s wall"
  grep -E "neighbours run|within their limit" "$OUT/sweep.log" "$OUT/sweep/check.md" | tail -3
fi
if wants calibrate-checks; then
step "scenario shapes (1 GPU, quick, at most 90 s)"
timeout 90 "$twin" calibrate --gpus 1 --quick --scenario scenarios/llama3-8b-4xH200.json --out /tmp/scenario.json \
  > /tmp/scenario.log 2>&1; echo "exit code $?"
grep -E "scenario|wrote|error" /tmp/scenario.log | tail -5
fi

if wants execute; then
step "twin execute: every strategy against the single-GPU loss, speed and scaling, faults (tests/gpu/execute_check.py)"
SECONDS=0
python3 tests/gpu/execute_check.py --twin "$twin" --out /tmp/execute-check --gpus "$gpus" \
  > "$OUT/execute_check.log" 2>&1 || status=1
cp /tmp/execute-check/execute_check.md "$OUT/" 2>/dev/null && cat "$OUT/execute_check.md"
echo "execute checks: ${SECONDS}s wall"
fi

if wants moe; then
step "twin execute on MoE plans: loss, routing skew, fold and predict again (tests/gpu/moe_check.py)"
SECONDS=0
run_check moe_check "${TWIN_MOE_PROFILE:-$machine_profile}"
echo "MoE checks: ${SECONDS}s wall"
fi

if wants context; then
step "twin execute on context-parallel plans: loss against one GPU, speed, trace and fold (tests/gpu/context_check.py)"
run_multi_gpu_check context_check "${TWIN_CONTEXT_PROFILE:-$machine_profile}" "context parallelism"
fi

if wants strands; then
step "twin execute on double-strand plans on one GPU: loss against 1F1B, co-running cost, fold (tests/gpu/strands_check.py)"
SECONDS=0
run_check strands_check "${TWIN_STRANDS_PROFILE:-$one_gpu_profile}"
echo "double-strand checks: ${SECONDS}s wall"
fi

for family in hot-switch per-layer; do
if wants $family; then
step "twin execute on $family plans on one GPU: loss and time against the family's baseline, fold (tests/gpu/family_check.py)"
SECONDS=0
case "$gpu_name" in *H100*) family_gpu=1xH100 ;; *) family_gpu=1xH200 ;; esac
stem=${family//-/_}_check
scenario=scenarios/llama2-7b-$family_gpu-$family.json
if [ ! -f "$scenario" ]; then echo "skipped: no $scenario (docs/ACCURACY.md says why)"; continue; fi
# 4 sequences of 16,384 per step (per-layer) spiked at 1e-4 where 18 sequences (hot-switch) did not (H200, 16:26 UTC).
case $family in per-layer) lr=3e-5 ;; *) lr=1e-4 ;; esac
python3 tests/gpu/family_check.py --twin "$twin" --family $family --out /tmp/$family-check --lr $lr \
  --scenario "$scenario" > "$OUT/$stem.log" 2>&1 || status=1
cp /tmp/$family-check/$stem.md /tmp/$family-check/$stem.json "$OUT/" 2>/dev/null && cat "$OUT/$stem.md"
tar czf "$OUT/$family-runs.tar.gz" --exclude=traces -C /tmp $family-check 2>/dev/null
echo "$family checks: ${SECONDS}s wall"
fi
done

if wants per-layer-layouts; then
step "twin execute on per-layer plans whose layers have their own TP, ZeRO and recompute: loss against one GPU, speed, trace and fold (tests/gpu/per_layer_layouts_check.py)"
run_multi_gpu_check per_layer_layouts_check "${TWIN_PER_LAYER_PROFILE:-$machine_profile}" "per-layer layouts"
fi

if wants hot-switch-layouts; then
step "twin execute on hot-switching plans whose phases run in different layouts: loss against one layout, speed, fold (tests/gpu/hot_switch_layouts_check.py)"
run_multi_gpu_check hot_switch_layouts_check "${TWIN_HOT_SWITCH_PROFILE:-$machine_profile}" "hot switching between layouts"
fi

if wants asymmetric; then
step "twin execute on asymmetric plans (pipelines of different layouts): loss against one GPU, speed, fold (tests/gpu/asymmetric_check.py)"
SECONDS=0
if [ "$gpus" -ge 4 ]; then
  run_check asymmetric_check "${TWIN_ASYMMETRIC_PROFILE:-$machine_profile}"
else
  echo "asymmetric plans need four GPUs here; this machine has $gpus (skipped)"
fi
echo "asymmetric plan checks: ${SECONDS}s wall"
fi

if wants mpirun && command -v mpirun > /dev/null; then
  # The launcher's ranks instead of twin's own: one process per GPU started by mpirun (as root here).
  step "under mpirun: twin calibrate --quick and twin execute with OMPI_COMM_WORLD_* ranks"
  mpi="mpirun --allow-run-as-root --oversubscribe -np $gpus -x NCCL_NVLS_ENABLE -x LD_LIBRARY_PATH"
  [ "$gpus" -gt 1 ] && mpi="$mpi -x NCCL_COMM_ID=${NCCL_COMM_ID:-127.0.0.1:29533}"
  $mpi "$twin" calibrate --quick --out /tmp/mpirun-profile.json > "$OUT/mpirun.log" 2>&1; echo "calibrate: exit $?"
  grep -E "rank|launcher|wrote|error" "$OUT/mpirun.log" | head -5
  plan=$(ls -d /tmp/execute-check/single/best.json 2>/dev/null | head -1)
  if [ -n "$plan" ] && [ "$gpus" -eq 1 ]; then
    $mpi "$twin" execute --plan "$plan" --run /tmp/mpirun-run --iters 4 --warmup 1 >> "$OUT/mpirun.log" 2>&1
    echo "execute: exit $?"; grep -E "launcher|loss|error" "$OUT/mpirun.log" | tail -4
  fi
fi

step "done: status $status"
exit $status
