// The interpreter's handler of the data-parallel and optimizer ops: per-unit gradient reduction (all-reduce, or
// reduce-scatter into the ZeRO shard; under ZeRO >= 2 added into the shard the rank keeps), parameter gathers (under
// ZeRO-3 from the kept shard into the window's whole buffer), the tied embedding's gradient sum, the global gradient
// norm, clipping and AdamW (its state as training.optimizer_precision stores it). It owns the norm's partial sums,
// the clip factor and the step count. Megatron also sums sequence-parallel norm-weight gradients over TP and
// reduces the norm over TP and PP; the graph has no op for those, so they run inside the first optimizer-phase op of
// an iteration (tiny messages). One public function per action: the runtime's dispatch names each.
#pragma once
#include <cuda_runtime.h>

#include <optional>

#include "executor/gpu/communicators.hpp"
#include "executor/gpu/op_pass.hpp"
#include "executor/gpu/pipeline_reduction_run.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/tensor_store.hpp"

namespace twin::exec {

// What the optimizer reads from the stage that runs it.
struct OptimizerStage {
  const StageLayout& layout;
  Communicators& comms;
  StageParameters& parameters;
  // An asymmetric plan's reductions across pipelines (null without them): every gradient is then the sum over the
  // pipelines after its segment's reduction; under ZeRO-1 over the pipelines the AdamW state lives in its parts.
  const PipelineReductionRun* pipeline_reduction = nullptr;
  bool sharded_over_pipelines = false;
  TrainingRecipe recipe;
  std::int64_t train_iters = 1;
};

class OptimizerRun {
 public:
  // Allocates the norm's sums and the clip factor from `tensors`.
  OptimizerRun(const OptimizerStage& stage, TensorStore& tensors);

  // Whether every step starts its gradients from zero (false: every weight's gradient is stored by its first op
  // of a step, OpBinding::first_gradient, and padding and gaps stay the zeros they were allocated as).
  void zero_gradients_each_step(bool zero) { zero_gradients_ = zero; }
  // Whether this part starts the step (StepPart::first): the gradient shards of the units that keep only those
  // (ZeRO >= 2), which every reduction adds to, start from zero then, whatever first_gradient stores.
  void starts_step(bool first) { starts_step_ = first; }
  // Zeroes the gradients on `compute` where the step starts them from zero.
  void start_iteration(cudaStream_t compute) {
    if (zero_gradients_)
      stage_.parameters.zero_grads(compute);
    else if (starts_step_)
      stage_.parameters.zero_gradient_shards(compute);
    fixups_done_ = false;
  }
  void grad_reduce(const OpPass& p);
  void param_gather(const OpPass& p);
  void embedding_grad_sync(const OpPass& p);
  void grad_norm(const OpPass& p);
  void optimizer_step(const OpPass& p);
  // The last iteration's global gradient norm (before clipping), none when it ran no optimizer op, and its
  // learning rate; call after the iteration finished.
  std::optional<double> last_grad_norm() const;
  double last_learning_rate() const { return learning_rate_; }

 private:
  // Sums SP norm-weight gradients over TP, then the squared gradient norm over the stage's GPUs (an asymmetric
  // plan: over its pipeline's GPUs at once), and turns it into the clip factor; once per iteration.
  void model_parallel_gradient_fixups(cudaStream_t stream);
  void sum_replicated_norm_gradients(cudaStream_t stream);
  // The op's group says whose weights: a layer's (the data group) or its experts' (the expert-data group).
  ParameterUnit& unit_named(const Op& op, std::int32_t id);
  ncclComm_t data_of(const Op& op, std::int32_t unit) const;

  OptimizerStage stage_;
  float* grad_partials_ = nullptr;
  float* grad_sum_squares_ = nullptr;  // device scalar
  float* clip_scale_ = nullptr;        // device scalar
  bool fixups_done_ = false;
  bool zero_gradients_ = true;
  bool starts_step_ = true;
  int step_ = 0;
  double learning_rate_ = 0;
};

}  // namespace twin::exec
