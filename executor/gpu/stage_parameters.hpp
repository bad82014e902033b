// The weights one rank holds on its GPU: per parameter unit (executor/parameters.hpp's layout) one flat
// bf16 parameter buffer, one flat bf16 gradient buffer, and AdamW's master weights and moments (fp32 or bf16,
// training.optimizer_precision) for the part this rank updates (all of it, or its ZeRO shard).
#pragma once
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/scenario.hpp"
#include "executor/parameters.hpp"
#include "gpu/kernels.hpp"

namespace twin::exec {

using kernels::bf16;  // one name for the 16-bit type, gpu/kernels.hpp's

// A unit's layout and its device buffers.
struct ParameterUnit : ParameterUnitLayout {
  explicit ParameterUnit(ParameterUnitLayout layout) : ParameterUnitLayout(std::move(layout)) {}
  bf16* params = nullptr;
  bf16* grads = nullptr;
  // AdamW's state for [update_begin, update_begin + update_elements), stored as the scenario's
  // optimizer_precision says (no master array when the bf16 parameters are the main ones).
  kernels::AdamWState adam;
};

class StageParameters {
 public:
  // Allocates and initialises the units `layouts` (executor/parameters.hpp's plan_parameter_units), their
  // optimizer state stored as the scenario's training.optimizer_precision says; without `optimizer_state`
  // (a hot-switching layout other than home's, which never steps) weights and gradients only.
  StageParameters(const Scenario& scenario, std::vector<ParameterUnitLayout> layouts, cudaStream_t stream,
                  bool optimizer_state = true);
  ~StageParameters();
  StageParameters(const StageParameters&) = delete;
  StageParameters& operator=(const StageParameters&) = delete;

  ParameterUnit& unit(std::int32_t id);
  std::vector<ParameterUnit*> units();
  std::int64_t total_elements() const;
  // Device bytes of every buffer here (parameters, gradients, AdamW state as stored).
  std::size_t allocated_bytes() const { return allocated_bytes_; }
  // Zeroes every gradient buffer (iteration start).
  void zero_grads(cudaStream_t stream);

 private:
  std::map<std::int32_t, ParameterUnit> units_;
  std::vector<void*> allocations_;
  std::size_t allocated_bytes_ = 0;
};

}  // namespace twin::exec
