// Every weight is initialised on the GPU by its global index (kernels::init_normal_shard), so any
// TP/PP/DP split holds the single-GPU model; fp32 master weights (where kept) start as the bf16 values.
#include "executor/gpu/stage_parameters.hpp"

#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

StageParameters::StageParameters(const Scenario& scenario, std::vector<ParameterUnitLayout> layouts,
                                 cudaStream_t stream, bool optimizer_state) {
  const auto allocate = [&](std::size_t bytes) {
    void* p = nullptr;
    TWIN_CUDA_CHECK(cudaMalloc(&p, bytes));
    allocations_.push_back(p);
    allocated_bytes_ += bytes;
    return p;
  };
  for (ParameterUnitLayout& layout : layouts) {
    ParameterUnit unit(std::move(layout));
    unit.params = static_cast<bf16*>(allocate(unit.padded * sizeof(bf16)));
    unit.grads = static_cast<bf16*>(allocate(unit.padded * sizeof(bf16)));
    const std::int64_t updated = optimizer_state ? unit.update_elements() : 0;
    const OptimizerPrecision& precision = scenario.training.optimizer_precision;
    const auto type_of = [](StateDtype dtype) {
      if (!executor_stores(dtype))
        throw std::invalid_argument("twin execute stores optimizer state in fp32 or bf16, not " + to_string(dtype));
      return dtype == StateDtype::bf16 ? kernels::StateType::bf16 : kernels::StateType::f32;
    };
    const auto moment = [&](StateDtype dtype) {
      void* p = allocate(updated * bytes_of(dtype));
      TWIN_CUDA_CHECK(cudaMemsetAsync(p, 0, updated * bytes_of(dtype), stream));  // zero in fp32 and bf16 alike
      return p;
    };
    unit.adam.m_type = type_of(precision.exp_avg);
    unit.adam.v_type = type_of(precision.exp_avg_sq);
    unit.adam.m = optimizer_state ? moment(precision.exp_avg) : nullptr;
    unit.adam.v = optimizer_state ? moment(precision.exp_avg_sq) : nullptr;
    if (optimizer_state && type_of(precision.main_params) == kernels::StateType::f32)
      unit.adam.master = static_cast<float*>(allocate(updated * sizeof(float)));
    TWIN_CUDA_CHECK(cudaMemsetAsync(unit.params, 0, unit.padded * sizeof(bf16), stream));
    for (const WeightTensor& w : unit.tensors) {
      if (w.part == WeightPart::bias)  // zeros, as Megatron starts biases (the buffer was zeroed above)
        continue;
      if (w.init_stddev == 0)
        kernels::fill_bf16(unit.params + w.offset, w.elements(), 1.0f, stream);
      else
        kernels::init_normal_shard(unit.params + w.offset, w.shard, w.seed, w.init_stddev, stream);
    }
    if (unit.adam.master) kernels::bf16_to_f32(unit.params + unit.update_begin(), unit.adam.master, updated, stream);
    TWIN_CUDA_CHECK(cudaMemsetAsync(unit.grads, 0, unit.padded * sizeof(bf16), stream));
    const std::int32_t id = unit.id;
    units_.emplace(id, std::move(unit));
  }
}

StageParameters::~StageParameters() {
  for (void* p : allocations_) cudaFree(p);
}

ParameterUnit& StageParameters::unit(std::int32_t id) {
  auto found = units_.find(id);
  if (found == units_.end()) throw std::logic_error(fmt::format("this rank holds no parameter unit {}", id));
  return found->second;
}

std::vector<ParameterUnit*> StageParameters::units() {
  std::vector<ParameterUnit*> all;
  for (auto& [id, unit] : units_) all.push_back(&unit);
  return all;
}

std::int64_t StageParameters::total_elements() const {
  std::int64_t total = 0;
  for (const auto& [id, unit] : units_) total += unit.elements;
  return total;
}

void StageParameters::zero_grads(cudaStream_t stream) {
  for (auto& [id, unit] : units_) TWIN_CUDA_CHECK(cudaMemsetAsync(unit.grads, 0, unit.padded * sizeof(bf16), stream));
}

}  // namespace twin::exec
