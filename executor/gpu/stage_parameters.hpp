// The weights one rank holds on its GPU: per parameter unit (executor/parameters.hpp's layout) one flat bf16
// parameter buffer, one flat gradient buffer (the main gradient: bf16, or fp32 where framework.main_grad_dtype says
// float32, as Megatron's main_grad), and AdamW's master weights and moments (fp32 or bf16,
// training.optimizer_precision) for the part this rank updates (all of it, or its ZeRO shard). Under ZeRO >= 2 (the
// gradients) and ZeRO-3 (the weights) over more than one GPU the rank keeps only its shard of them; the whole buffer
// exists while the op graph needs it (executor/weight_residency.hpp).
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
  // The whole unit, [0, padded): kept for the run, except where the unit shards them (shards_weights,
  // shards_gradients): then they exist only inside the windows executor/weight_residency.hpp finds, from CUDA's
  // stream-ordered pool (executor/gpu/weight_residency_run.hpp), and are nullptr outside them.
  bf16* params = nullptr;
  kernels::GradRef grads;
  // This rank's shard [shard_begin, shard_begin + shard_elements), kept for the run where the unit shards it: the
  // weights AdamW updates and the gathers read (ZeRO-3), the reduced gradients each grad_reduce adds into (ZeRO >= 2).
  bf16* weight_shard = nullptr;
  kernels::GradRef gradient_shard;
  // Element `e` of the weights and of the gradients as the rank keeps them between the windows: in the shard
  // buffer where the unit keeps only its shard (throws unless `e` lies in it), else in the whole buffer. What the
  // optimizer's ops and the layout switch read and write (the part AdamW updates, the gradients held after the
  // reduction).
  bf16* weights_at(std::int64_t e) const;
  kernels::GradRef gradients_at(std::int64_t e) const;
  // The gradients where a path keeps bf16 ones only (MLA, FP8 linears, sinks, ZeRO-2/3 shards, layout switches:
  // refused with fp32 main gradients by executor/main_gradient_check.hpp); throws on an fp32 buffer.
  bf16* bf16_grads() const;
  bf16* bf16_gradients_at(std::int64_t e) const;
  // AdamW's state for [update_begin, update_begin + update_elements), stored as the scenario's
  // optimizer_precision says (no master array when the bf16 parameters are the main ones).
  kernels::AdamWState adam;
};

// The main gradient's type (framework.main_grad_dtype; core/framework.hpp main_gradient_bytes).
kernels::GradType main_gradient_type(const Scenario& scenario);
// A gradient where a path keeps bf16 ones only (as ParameterUnit::bf16_grads); throws on fp32.
bf16* bf16_gradient(const kernels::GradRef& gradient);

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
  // Device bytes of every buffer kept for the run (parameters or their shards, gradients or their shards, AdamW
  // state as stored); the whole buffers of sharded units come from the pool, whose high mark the runtime adds.
  std::size_t allocated_bytes() const { return allocated_bytes_; }
  // Zeroes every gradient buffer kept for the run (iteration start): whole ones, and the shards of sharded units.
  void zero_grads(cudaStream_t stream);
  // Zeroes the gradient shards of the units that keep only those (a step's first part starts them from zero even
  // where every whole gradient is stored by its first op).
  void zero_gradient_shards(cudaStream_t stream);

 private:
  void* allocate(std::size_t bytes);
  // The unit's weights initialised by their global index into `whole` ([0, padded)); its fp32 master weights from them.
  void initialise_weights(ParameterUnit& unit, bf16* whole, cudaStream_t stream);
  // AdamW's state for the part the unit updates, typed as `precision` says (none without `optimizer_state`).
  void allocate_optimizer_state(ParameterUnit& unit, const OptimizerPrecision& precision, bool optimizer_state,
                                cudaStream_t stream);

  std::map<std::int32_t, ParameterUnit> units_;
  std::vector<void*> allocations_;
  std::size_t allocated_bytes_ = 0;
};

}  // namespace twin::exec
