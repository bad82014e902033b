// The windows' buffers made and freed around the ops that open and close them (executor/gpu/weight_residency_run.hpp).
#include "executor/gpu/weight_residency_run.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "gpu/checks.hpp"

namespace twin::exec {

WeightResidencyRun::WeightResidencyRun(WeightResidency plan, StageParameters& parameters,
                                       std::set<std::int32_t> stored)
    : plan_(std::move(plan)), parameters_(parameters), stored_(std::move(stored)) {}

void* WeightResidencyRun::buffer_of(const ResidencyChange& change) {
  ParameterUnit& unit = parameters_.unit(change.unit);
  const bool gradients = change.buffer == Residency::gradients;
  if (!(gradients ? unit.shards_gradients() : unit.shards_weights()))
    throw std::logic_error(fmt::format("executor: a residency window of parameter unit {}, which keeps its whole {}",
                                       change.unit, gradients ? "gradients" : "weights"));
  return gradients ? unit.grads.data : static_cast<void*>(unit.params);
}

void WeightResidencyRun::set_buffer(const ResidencyChange& change, void* buffer) {
  buffer_of(change);  // throws for a unit that keeps the buffer whole
  ParameterUnit& unit = parameters_.unit(change.unit);
  if (change.buffer == Residency::gradients)
    unit.grads.data = buffer;
  else
    unit.params = static_cast<bf16*>(buffer);
}

void WeightResidencyRun::before(OpIndex op, cudaStream_t stream, const IssueEvents& events) {
  if (plan_.empty()) return;
  const OpResidency& at = plan_.at(op);
  for (OpIndex from : at.waits) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, events.op_done(from)));
  for (const ResidencyChange& release : at.release)
    for (OpIndex from : release.after) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, events.op_done(from)));
  for (const ResidencyChange& acquire : at.acquire) {
    if (buffer_of(acquire))
      throw std::logic_error(fmt::format("executor: parameter unit {}'s whole {} made twice", acquire.unit,
                                         acquire.buffer == Residency::gradients ? "gradients" : "weights"));
    const ParameterUnit& unit = parameters_.unit(acquire.unit);
    const bool gradients = acquire.buffer == Residency::gradients;
    const std::size_t element = gradients ? unit.grads.element_bytes() : sizeof(bf16);
    const std::size_t bytes = unit.padded * element;
    void* buffer = nullptr;
    TWIN_CUDA_CHECK(cudaMallocAsync(&buffer, bytes, stream));
    set_buffer(acquire, buffer);
    if (!gradients) continue;
    if (!stored_.count(acquire.unit)) {
      TWIN_CUDA_CHECK(cudaMemsetAsync(buffer, 0, bytes, stream));
      continue;
    }
    for (const ElementRange& gap : uncovered_ranges(unit))
      TWIN_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(buffer) + gap.begin * element, 0, gap.count * element, stream));
  }
}

void WeightResidencyRun::after(OpIndex op, cudaStream_t stream) {
  if (plan_.empty()) return;
  for (const ResidencyChange& release : plan_.at(op).release) {
    TWIN_CUDA_CHECK(cudaFreeAsync(buffer_of(release), stream));
    set_buffer(release, nullptr);
  }
}

ShardedUnits sharded_units(StageParameters& parameters) {
  ShardedUnits units;
  for (const ParameterUnit* unit : parameters.units()) units.add(*unit);
  return units;
}

}  // namespace twin::exec
