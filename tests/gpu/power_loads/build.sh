#!/usr/bin/env bash
# Links the power model's device probes against a configured build's objects (BUILD, default build), without the
# whole twin-gpu: tests/gpu/power_loads/power_loads.cpp (the calibration's loads and fit) and the NVML GPU tests
# (tests/gpu/nvml_power_test.cpp) on the runtime, calibration, cost and core libraries and the three calibrate/gpu
# objects the load needs; tests/gpu/power_loads/step_clock_of_plan.cpp (no GPU) on the strategies, simulator, cost
# and core libraries. Writes BUILD/power_loads, BUILD/nvml_power_test, BUILD/step_clock_of_plan.
# Usage: bash tests/gpu/power_loads/build.sh [BUILD]
set -euo pipefail
build="${1:-build}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
cmake --build "$build" -j2 --target twin_gpu_runtime twin_calibrate twin_cost twin_core twin_sim twin_strategies \
  twin_strategies_families twin_strategies_per_layer twin_strategies_hot_switch twin_strategies_heterogeneous \
  twin_strategies_double_strand \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/sustained_clock.cpp.o \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/clock_probe.cu.o \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/gemm_bench.cpp.o
flags=(-O2 -std=c++20 -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED -I"$root")
cuda=/usr/local/cuda/lib
# link_gpu OUTPUT SOURCE [LIBS...]: SOURCE on the GPU runtime and the sustained-clock load.
link_gpu() {
  local output="$1" source="$2"; shift 2
  c++ "${flags[@]}" -DTWIN_WITH_CUDA -I/usr/local/cuda/include -I/usr/local/cuda/targets/x86_64-linux/include \
    -o "$build/$output" "$source" \
    "$build"/CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/{sustained_clock.cpp.o,clock_probe.cu.o,gemm_bench.cpp.o} \
    "$build"/libtwin_calibrate.a "$build"/libtwin_cost.a "$build"/libtwin_gpu_runtime.a "$build"/libtwin_core.a \
    -L/usr/local/cuda/targets/x86_64-linux/lib -Wl,-rpath,/usr/local/cuda/lib "$@" \
    -lspdlog -lfmt "$cuda"/libcudart.so "$cuda"/libcublas.so "$cuda"/libcublasLt.so "$cuda"/libcupti.so \
    "$cuda"/libnccl.so "$cuda"/libcudnn.so -lcudadevrt -lcudart_static -lrt -lpthread -ldl
}
link_gpu power_loads "$here/power_loads.cpp"
link_gpu nvml_power_test "$root/tests/gpu/nvml_power_test.cpp" -lgtest -lgtest_main
b="$build"
c++ "${flags[@]}" -o "$build/step_clock_of_plan" "$here/step_clock_of_plan.cpp" \
  "$b"/libtwin_strategies_families.a "$b"/libtwin_strategies_per_layer.a "$b"/libtwin_strategies_hot_switch.a \
  "$b"/libtwin_strategies_heterogeneous.a "$b"/libtwin_strategies.a "$b"/libtwin_strategies_double_strand.a \
  "$b"/libtwin_strategies_families.a "$b"/libtwin_strategies.a \
  "$b"/libtwin_sim.a "$b"/libtwin_cost.a "$b"/libtwin_core.a -lspdlog -lfmt -lz -lpthread
