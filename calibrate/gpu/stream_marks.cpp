// Host functions run on a thread of the CUDA runtime, in stream order, and must not throw: each records a failure in
// its mark instead, and the reader's accessor throws after the stream is synchronized.
#include "calibrate/gpu/stream_marks.hpp"

#include <chrono>
#include <stdexcept>
#include <utility>

#include "calibrate/gpu/fit.hpp"
#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

void CUDART_CB read_energy_mark(void* data) {
  auto* mark = static_cast<EnergyMark*>(data);
  try {
    mark->energy_J = mark->nvml->energy_J();
    mark->at_s = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  } catch (...) {
    mark->failed = true;
  }
}

void CUDART_CB read_clock_sample(void* data) {
  auto* sample = static_cast<ClockSample*>(data);
  try {
    sample->sm_clock_MHz = sample->nvml->sm_clock_MHz();
  } catch (...) {
    sample->failed = true;
  }
}

}  // namespace

StreamWindow::StreamWindow(const NvmlPower& nvml, double settle_s, std::size_t clock_samples)
    : nvml_(nvml), settle_s_(settle_s) {
  start_.nvml = end_.nvml = &nvml_;
  clocks_.reserve(clock_samples);
}

void StreamWindow::mark_start(cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaLaunchHostFunc(stream, read_energy_mark, &start_));
}

void StreamWindow::mark_end(cudaStream_t stream) { TWIN_CUDA_CHECK(cudaLaunchHostFunc(stream, read_energy_mark, &end_)); }

void StreamWindow::sample_clock(cudaStream_t stream) {
  if (clocks_.size() == clocks_.capacity()) return;  // a reallocation would move what enqueued functions point to
  clocks_.push_back({&nvml_});
  TWIN_CUDA_CHECK(cudaLaunchHostFunc(stream, read_clock_sample, &clocks_.back()));
}

double StreamWindow::power_W() const {
  if (start_.failed || end_.failed || !(end_.at_s > start_.at_s))
    throw std::runtime_error("sustained clock: NVML's energy counter could not be read around a load");
  return (end_.energy_J - start_.energy_J) / (end_.at_s - start_.at_s);
}

double StreamWindow::median_sm_clock_MHz() const {
  std::vector<double> clocks;
  for (const ClockSample& s : clocks_) {
    if (s.failed) throw std::runtime_error("sustained clock: NVML's SM clock could not be read during a load");
    clocks.push_back(s.sm_clock_MHz);
  }
  return clocks.empty() ? 0 : percentile(std::move(clocks), 0.5);
}

}  // namespace twin::gpu
