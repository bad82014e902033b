// A hot-switching part's switch into its layout: the rectangles executor/resharding.hpp planned, unit by unit on
// the switch's stream, each unit's event recorded after its transfers.
#include "executor/gpu/layout_switch.hpp"

#include "executor/gpu/resharding_run.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {

LayoutSwitch::LayoutSwitch(const StepPart& part, int rank, std::shared_ptr<StageParameters> parameters)
    : part_(part), rank_(rank), parameters_(std::move(parameters)) {
  TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&switched_, cudaEventDisableTiming));
  if (!part_.switch_from) return;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  TWIN_CUDA_CHECK(cudaEventCreate(&done_));  // timed from the iteration's start
  if (part_.switch_from != parameters_) units_ = blocks_by_unit(part_.switch_blocks);
  for (const auto& [unit, blocks] : units_)
    TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&unit_switched_[unit], cudaEventDisableTiming));
}

LayoutSwitch::~LayoutSwitch() {
  cudaEventDestroy(switched_);
  if (done_) cudaEventDestroy(done_);
  for (auto& [unit, event] : unit_switched_) cudaEventDestroy(event);
  if (stream_) cudaStreamDestroy(stream_);
}

void LayoutSwitch::run(cudaEvent_t start, cudaStream_t compute) {
  waited_.clear();
  if (!part_.switch_from) {
    TWIN_CUDA_CHECK(cudaEventRecord(switched_, compute));
    return;
  }
  TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream_, start));
  if (part_.adds_gradients) {
    if (part_.switch_from == parameters_)
      keep_gradient_start(*parameters_, stream_);
    else
      parameters_->zero_grads(stream_);
  }
  TWIN_CUDA_CHECK(cudaEventRecord(switched_, stream_));
  for (const auto& [unit, blocks] : units_) {
    run_resharding(blocks, rank_, *part_.switch_from, *parameters_, part_.switch_comm, stream_);
    TWIN_CUDA_CHECK(cudaEventRecord(unit_switched_.at(unit), stream_));
  }
  TWIN_CUDA_CHECK(cudaEventRecord(done_, stream_));
}

void LayoutSwitch::wait_for_units(const Op& op, const OpBinding& b, std::int32_t unit, cudaStream_t stream) {
  if (unit_switched_.empty()) return;
  const bool parameters =
      b.action == Action::param_gather || b.action == Action::grad_reduce || b.action == Action::embedding_grad_sync;
  if (op.is_communication() && !parameters) return;
  const bool every_unit = op.phase == Phase::optimizer || (parameters && op.parameter_unit == kWholeStage);
  const std::int32_t touched = parameters ? op.parameter_unit : unit;
  for (const auto& [switched, event] : unit_switched_)
    if ((every_unit || switched == touched) && waited_.insert({static_cast<int>(op.stream), switched}).second)
      TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, event));
}

void LayoutSwitch::join(cudaStream_t compute) {
  if (done_) TWIN_CUDA_CHECK(cudaStreamWaitEvent(compute, done_));
}

double LayoutSwitch::seconds_since(cudaEvent_t start) const {
  if (!done_) return 0;
  float switch_ms = 0;
  TWIN_CUDA_CHECK(cudaEventElapsedTime(&switch_ms, start, done_));
  return switch_ms / 1e3;
}

}  // namespace twin::exec
