#!/usr/bin/env bash
# Links tests/gpu/power_loads/power_loads.cpp against a configured build's objects (BUILD, default build): the
# runtime, calibration, cost and core libraries and the three calibrate/gpu objects the load needs. Writes
# BUILD/power_loads. Usage: bash tests/gpu/power_loads/build.sh [BUILD]
set -euo pipefail
build="${1:-build}"
src="$(cd "$(dirname "$0")" && pwd)/power_loads.cpp"
root="$(cd "$(dirname "$0")/../../.." && pwd)"
cmake --build "$build" -j2 --target twin_gpu_runtime twin_calibrate twin_cost twin_core \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/sustained_clock.cpp.o \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/clock_probe.cu.o \
  CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/gemm_bench.cpp.o
cuda=/usr/local/cuda/lib
c++ -O2 -std=c++20 -DTWIN_WITH_CUDA -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED \
  -I"$root" -I/usr/local/cuda/include -I/usr/local/cuda/targets/x86_64-linux/include \
  -o "$build/power_loads" "$src" \
  "$build"/CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/{sustained_clock.cpp.o,clock_probe.cu.o,gemm_bench.cpp.o} \
  "$build"/libtwin_calibrate.a "$build"/libtwin_cost.a "$build"/libtwin_gpu_runtime.a "$build"/libtwin_core.a \
  -L/usr/local/cuda/targets/x86_64-linux/lib -Wl,-rpath,/usr/local/cuda/lib \
  -lspdlog -lfmt "$cuda"/libcudart.so "$cuda"/libcublas.so "$cuda"/libcublasLt.so "$cuda"/libcupti.so \
  "$cuda"/libnccl.so "$cuda"/libcudnn.so -lcudadevrt -lcudart_static -lrt -lpthread -ldl
# The NVML GPU tests (tests/gpu/nvml_power_test.cpp, in test_gpu too) alone, for a device call without test_gpu.
c++ -O2 -std=c++20 -DTWIN_WITH_CUDA -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED \
  -I"$root" -I/usr/local/cuda/include -I/usr/local/cuda/targets/x86_64-linux/include \
  -o "$build/nvml_power_test" "$root/tests/gpu/nvml_power_test.cpp" \
  "$build"/CMakeFiles/twin_calibrate_gpu.dir/calibrate/gpu/{sustained_clock.cpp.o,clock_probe.cu.o,gemm_bench.cpp.o} \
  "$build"/libtwin_calibrate.a "$build"/libtwin_cost.a "$build"/libtwin_gpu_runtime.a "$build"/libtwin_core.a \
  -L/usr/local/cuda/targets/x86_64-linux/lib -Wl,-rpath,/usr/local/cuda/lib -lgtest -lgtest_main \
  -lspdlog -lfmt "$cuda"/libcudart.so "$cuda"/libcublas.so "$cuda"/libcublasLt.so "$cuda"/libcupti.so \
  "$cuda"/libnccl.so "$cuda"/libcudnn.so -lcudadevrt -lcudart_static -lrt -lpthread -ldl
# The plan-pricing tool (no GPU): the strategies, simulator, cost and core libraries.
b="$build"
c++ -O2 -std=c++20 -DSPDLOG_COMPILED_LIB -DSPDLOG_FMT_EXTERNAL -DSPDLOG_SHARED_LIB -DFMT_SHARED -I"$root" \
  -o "$build/step_clock_of_plan" "$(dirname "$src")/step_clock_of_plan.cpp" \
  "$b"/libtwin_strategies_families.a "$b"/libtwin_strategies_per_layer.a "$b"/libtwin_strategies_hot_switch.a \
  "$b"/libtwin_strategies_heterogeneous.a "$b"/libtwin_strategies.a "$b"/libtwin_strategies_double_strand.a \
  "$b"/libtwin_strategies_families.a "$b"/libtwin_strategies.a \
  "$b"/libtwin_sim.a "$b"/libtwin_cost.a "$b"/libtwin_core.a -lspdlog -lfmt -lz -lpthread
