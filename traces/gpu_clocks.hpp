// The SM clock a run's GPUs held: `gpu_clocks.csv` in a run folder, one line per GPU and sample,
//   index, clocks.sm [MHz], power.draw [W], utilization.gpu [%]
// as `nvidia-smi --query-gpu=index,clocks.sm,power.draw,utilization.gpu --format=csv,noheader,nounits -lms 100`
// writes it while the run lasts (tests/gpu/accuracy_study.py does). A GPU at its power limit under a training
// mix holds a lower clock than calibration's GEMM timings saw; `twin calibrate --from-trace` folds the median
// (calibrate/recalibration.hpp, rule 0).
#pragma once
#include <filesystem>
#include <optional>

namespace twin {

// The nvidia-smi arguments that write the file (every GPU every 100 ms), for whoever samples a run.
inline constexpr const char* kGpuClocksQuery = "--query-gpu=index,clocks.sm,power.draw,utilization.gpu";
inline constexpr const char* kGpuClocksFormat = "--format=csv,noheader,nounits";
inline constexpr const char* kGpuClocksIntervalMs = "100";

struct GpuClockSummary {
  double sm_clock_MHz = 0;  // median over the busy samples of every GPU
  double power_W = 0;       // median power over the same samples
  int busy_samples = 0;     // samples with utilization >= kBusyUtilizationPercent
};

// A sample counts when the GPU ran a kernel this share of the sampling interval: start-up, warm-up and the
// idle end of a run fall below it.
inline constexpr double kBusyUtilizationPercent = 90;

// The summary of the file at `path`; nullopt when no sample is busy. A field nvidia-smi could not read
// ("[N/A]") makes its sample not count; a final line cut short (the sampler stopped mid-write) is skipped.
// Throws InputError naming the file and line for any other malformed line.
std::optional<GpuClockSummary> read_gpu_clocks(const std::filesystem::path& path);

}  // namespace twin
