// NVML readings taken where a GPU stream reaches a point of its work: the energy counter at the start and end of a
// load's counted part (the mean power between them is that of the kernels between them) and the SM clock NVML reports
// at evenly spaced points of it (a reading of the clock independent of the clock probe's cycle count).
//
// Why host functions in the stream: the host runs ahead of the GPU, so a reading taken when the host enqueues work
// says nothing of that work; a host function enqueued between two kernels runs when the GPU gets there. Each one costs
// the stream a few microseconds, so a load of seconds takes a few dozen clock samples, not one per kernel.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

#include "gpu/nvml_power.hpp"

namespace twin::gpu {

struct EnergyMark {
  const NvmlPower* nvml = nullptr;
  double energy_J = 0, at_s = 0;
  bool failed = false;  // NVML's call failed inside the host function (no exception may leave it)
};

struct ClockSample {
  const NvmlPower* nvml = nullptr;
  double sm_clock_MHz = 0;
  bool failed = false;
};

// The marks of a load's counted part (its first `settle_s` left out). Not movable once marks are enqueued: the
// stream's host functions hold pointers into it until the stream is synchronized.
class StreamWindow {
 public:
  StreamWindow(const NvmlPower& nvml, double settle_s, std::size_t clock_samples);
  StreamWindow(const StreamWindow&) = delete;
  StreamWindow& operator=(const StreamWindow&) = delete;

  double settle_s() const { return settle_s_; }
  std::size_t clock_samples_wanted() const { return clocks_.capacity(); }
  void mark_start(cudaStream_t stream);
  void mark_end(cudaStream_t stream);
  void sample_clock(cudaStream_t stream);  // at most clock_samples_wanted(); further calls enqueue nothing

  // After the stream was synchronized. Throws std::runtime_error where NVML could not be read.
  double power_W() const;
  double median_sm_clock_MHz() const;  // 0: no sample was enqueued

 private:
  const NvmlPower& nvml_;
  double settle_s_;
  EnergyMark start_, end_;
  std::vector<ClockSample> clocks_;  // reserved up front: host functions hold its elements' addresses
};

}  // namespace twin::gpu
