// Every weight is initialised on the GPU by its global index (kernels::init_normal_shard), so any
// TP/PP/DP split holds the single-GPU model; fp32 master weights (where kept) start as the bf16 values.
#include "executor/gpu/stage_parameters.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "gpu/checks.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

namespace {

kernels::StateType state_type(StateDtype dtype) {
  if (!executor_stores(dtype))
    throw std::invalid_argument("twin execute stores optimizer state in fp32 or bf16, not " + to_string(dtype));
  return dtype == StateDtype::bf16 ? kernels::StateType::bf16 : kernels::StateType::f32;
}

// Where `e` lies in a shard starting at `begin` of `count` elements; throws outside it (an op would read another
// rank's elements, which this rank does not keep).
std::int64_t in_shard(std::int64_t e, std::int64_t begin, std::int64_t count, std::int32_t unit) {
  if (e < begin || e > begin + count)
    throw std::logic_error(fmt::format("parameter unit {}: element {} outside this rank's shard [{}, {})", unit, e,
                                       begin, begin + count));
  return e - begin;
}

}  // namespace

kernels::GradType main_gradient_type(const Scenario& scenario) {
  return main_gradient_bytes(scenario.framework) == 4 ? kernels::GradType::f32 : kernels::GradType::bf16;
}

bf16* ParameterUnit::weights_at(std::int64_t e) const {
  return shards_weights() ? weight_shard + in_shard(e, shard_begin, shard_elements, id) : params + e;
}

kernels::GradRef ParameterUnit::gradients_at(std::int64_t e) const {
  return shards_gradients() ? gradient_shard.at(in_shard(e, shard_begin, shard_elements, id)) : grads.at(e);
}

bf16* bf16_gradient(const kernels::GradRef& gradient) {
  if (gradient.type != kernels::GradType::bf16)
    throw std::logic_error("executor: a path that keeps bf16 gradients only, over fp32 main gradients (the plan check "
                           "refuses such plans: executor/main_gradient_check.hpp)");
  return static_cast<bf16*>(gradient.data);
}

bf16* ParameterUnit::bf16_grads() const { return bf16_gradient(grads); }
bf16* ParameterUnit::bf16_gradients_at(std::int64_t e) const { return bf16_gradient(gradients_at(e)); }

void* StageParameters::allocate(std::size_t bytes) {
  void* p = nullptr;
  TWIN_CUDA_CHECK(cudaMalloc(&p, bytes));
  allocations_.push_back(p);
  allocated_bytes_ += bytes;
  return p;
}

StageParameters::StageParameters(const Scenario& scenario, std::vector<ParameterUnitLayout> layouts,
                                 cudaStream_t stream, bool optimizer_state) {
  // ZeRO-3's units are initialised whole in one scratch buffer (the largest), then keep their shard.
  std::int64_t scratch_elements = 0;
  for (const ParameterUnitLayout& layout : layouts)
    if (layout.shards_weights()) scratch_elements = std::max(scratch_elements, layout.padded);
  bf16* scratch = nullptr;
  if (scratch_elements > 0) TWIN_CUDA_CHECK(cudaMalloc(&scratch, scratch_elements * sizeof(bf16)));
  const kernels::GradType grad_type = main_gradient_type(scenario);
  const std::size_t grad_bytes = kernels::element_bytes(grad_type);
  for (ParameterUnitLayout& layout : layouts) {
    ParameterUnit unit(std::move(layout));
    const std::size_t shard_bytes = unit.shard_elements * sizeof(bf16), whole_bytes = unit.padded * sizeof(bf16);
    if (unit.shards_weights())
      unit.weight_shard = static_cast<bf16*>(allocate(shard_bytes));
    else
      unit.params = static_cast<bf16*>(allocate(whole_bytes));
    if (unit.shards_gradients())
      unit.gradient_shard = {allocate(unit.shard_elements * grad_bytes), grad_type};
    else
      unit.grads = {allocate(unit.padded * grad_bytes), grad_type};
    allocate_optimizer_state(unit, scenario.training.optimizer_precision, optimizer_state, stream);
    initialise_weights(unit, unit.shards_weights() ? scratch : unit.params, stream);
    if (unit.shards_weights())
      TWIN_CUDA_CHECK(cudaMemcpyAsync(unit.weight_shard, scratch + unit.shard_begin, shard_bytes,
                                      cudaMemcpyDeviceToDevice, stream));
    if (unit.shards_gradients())
      TWIN_CUDA_CHECK(cudaMemsetAsync(unit.gradient_shard.data, 0, unit.shard_elements * grad_bytes, stream));
    else
      TWIN_CUDA_CHECK(cudaMemsetAsync(unit.grads.data, 0, unit.padded * grad_bytes, stream));
    const std::int32_t id = unit.id;
    units_.emplace(id, std::move(unit));
  }
  if (scratch) {  // the copies out of it are done before it goes
    TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    TWIN_CUDA_CHECK(cudaFree(scratch));
  }
}

void StageParameters::allocate_optimizer_state(ParameterUnit& unit, const OptimizerPrecision& precision,
                                               bool optimizer_state, cudaStream_t stream) {
  unit.adam.m_type = state_type(precision.exp_avg);
  unit.adam.v_type = state_type(precision.exp_avg_sq);
  if (!optimizer_state) return;
  const std::int64_t updated = unit.update_elements();
  const auto moment = [&](StateDtype dtype) {
    void* p = allocate(updated * bytes_of(dtype));
    TWIN_CUDA_CHECK(cudaMemsetAsync(p, 0, updated * bytes_of(dtype), stream));  // zero in fp32 and bf16 alike
    return p;
  };
  unit.adam.m = moment(precision.exp_avg);
  unit.adam.v = moment(precision.exp_avg_sq);
  if (precision.store_param_remainders) {  // zero: the master is the initial bf16 parameters exactly
    unit.adam.remainders = static_cast<std::int16_t*>(allocate(updated * sizeof(std::int16_t)));
    TWIN_CUDA_CHECK(cudaMemsetAsync(unit.adam.remainders, 0, updated * sizeof(std::int16_t), stream));
  } else if (state_type(precision.main_params) == kernels::StateType::f32) {
    unit.adam.master = static_cast<float*>(allocate(updated * sizeof(float)));
  }
}

void StageParameters::initialise_weights(ParameterUnit& unit, bf16* whole, cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaMemsetAsync(whole, 0, unit.padded * sizeof(bf16), stream));
  for (const WeightTensor& w : unit.tensors) {
    // Zeros: Megatron's biases (the buffer was zeroed), but the router's, drawn as its weight.
    if ((w.part == WeightPart::bias || w.part == WeightPart::sinks) && w.init_stddev == 0) continue;
    if (w.init_stddev == 0)
      kernels::fill_bf16(whole + w.offset, w.elements(), 1.0f, stream);
    else
      kernels::init_normal_shard(whole + w.offset, w.shard, w.seed, w.init_stddev, stream);
  }
  if (unit.adam.master)
    kernels::bf16_to_f32(whole + unit.update_begin(), unit.adam.master, unit.update_elements(), stream);
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
  for (auto& [id, unit] : units_)
    if (!unit.shards_gradients())
      TWIN_CUDA_CHECK(cudaMemsetAsync(unit.grads.data, 0, unit.padded * unit.grads.element_bytes(), stream));
  zero_gradient_shards(stream);
}

void StageParameters::zero_gradient_shards(cudaStream_t stream) {
  for (auto& [id, unit] : units_)
    if (unit.shards_gradients())
      TWIN_CUDA_CHECK(cudaMemsetAsync(unit.gradient_shard.data, 0,
                                      unit.shard_elements * unit.gradient_shard.element_bytes(), stream));
}

}  // namespace twin::exec
