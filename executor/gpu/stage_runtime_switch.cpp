// A hot-switching part's switch into its layout (StepPart): the gradients zeroed where the part starts them from
// zero, then unit by unit the rectangles executor/resharding.hpp planned, on the runtime's switch stream; each op
// touching a unit's weights or gradients waits for that unit's transfers on its own stream.
#include "executor/gpu/resharding_run.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {

void StageRuntime::switch_into(cudaStream_t compute) {
  switch_waited_.clear();
  if (!part_.switch_from) {
    TWIN_CUDA_CHECK(cudaEventRecord(switched_, compute));
    return;
  }
  TWIN_CUDA_CHECK(cudaStreamWaitEvent(switch_stream_, iteration_start_));
  const bool same_buffers = part_.switch_from == params_;
  if (part_.adds_gradients) {
    if (same_buffers)
      keep_gradient_start(*params_, switch_stream_);
    else
      params_->zero_grads(switch_stream_);
  }
  TWIN_CUDA_CHECK(cudaEventRecord(switched_, switch_stream_));
  for (const auto& [unit, blocks] : switch_units_) {
    run_resharding(blocks, rank_, *part_.switch_from, *params_, part_.switch_comm, switch_stream_);
    TWIN_CUDA_CHECK(cudaEventRecord(unit_switched_.at(unit), switch_stream_));
  }
  TWIN_CUDA_CHECK(cudaEventRecord(switch_done_, switch_stream_));
}

void StageRuntime::wait_for_switch(OpIndex index, cudaStream_t stream) {
  if (unit_switched_.empty()) return;
  const Op& op = rc_.op(index);
  const OpBinding& b = bindings_[index];
  const bool parameters =
      b.action == Action::param_gather || b.action == Action::grad_reduce || b.action == Action::embedding_grad_sync;
  if (op.is_communication() && !parameters) return;
  const bool every_unit = op.phase == Phase::optimizer || (parameters && op.parameter_unit == kWholeStage);
  const std::int32_t unit = parameters ? op.parameter_unit : unit_of(op, b);
  for (const auto& [switched, event] : unit_switched_)
    if ((every_unit || switched == unit) && switch_waited_.insert({static_cast<int>(op.stream), switched}).second)
      TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, event));
}

}  // namespace twin::exec
