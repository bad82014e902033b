// The clock a run's GPUs hold, recorded beside it: while a ClockSampler lives, nvidia-smi samples every GPU of
// this node every 100 ms (index, SM clock, power, utilisation) into RUN/gpu_clocks.csv, the file
// `twin calibrate --from-trace` folds (traces/gpu_clocks.hpp; docs/PROFILES.md, "The clock of a training step").
// It only reads the GPUs: their settings are never touched. Where nvidia-smi cannot be started, the run goes on
// without the file (one warning).
#pragma once
#include <filesystem>

#include <sys/types.h>

namespace twin::exec {

class ClockSampler {
 public:
  explicit ClockSampler(const std::filesystem::path& run_dir);
  ~ClockSampler();  // stops nvidia-smi and puts the finished file in place
  ClockSampler(const ClockSampler&) = delete;
  ClockSampler& operator=(const ClockSampler&) = delete;

 private:
  std::filesystem::path partial_, final_;
  pid_t pid_ = -1;
};

}  // namespace twin::exec
