// The per-rank interpreter: runs the op graph of the rank's class, op for op, each op as real kernels or NCCL calls
// on the stream the graph gives it, with an event wait for every cross-stream dependency of the graph, so that the
// overlap the simulator assumed is the overlap that happens. An issue loop, a tensor store and one handler per
// action family, each owning its state: the dense block, MoE's experts blocks, context parallelism's ring, Ulysses'
// all-to-alls, pipeline boundaries, the reductions across pipelines, the layout switch and the optimizer.
// Activations live per (micro-batch, parameter unit) and are freed where Megatron frees them (after the unit's
// backward; after the forward under full recompute; gathered SP inputs right after their GEMM); so do the whole
// weights and gradients of units that ZeRO shards beyond its optimizer state (executor/weight_residency.hpp).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "executor/gpu/action_handlers.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/issue_events.hpp"
#include "executor/gpu/stage_layout.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/step_part.hpp"
#include "executor/gpu/stream_scratch.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/gpu/training_options.hpp"
#include "executor/gpu/weight_residency_run.hpp"
#include "executor/op_binding.hpp"
#include "executor/run_report.hpp"
#include "executor/watchdog.hpp"

namespace twin::gpu {
class CuptiKernelTimer;
}

namespace twin::exec {

class StageRuntime {
 public:
  // Runs `rank_class` of `graph`, the class of this rank in `plan_part` (its scenario, strategy, packed rows
  // and, in a per-layer plan, each layer's strategy; plan_part outlives the runtime).
  StageRuntime(const PlanPart& plan_part, const IterationGraph& graph, const RankClass& rank_class, int rank,
               Communicators& comms, const TrainingOptions& options, StepPart part = {});
  ~StageRuntime();
  StageRuntime(const StageRuntime&) = delete;
  StageRuntime& operator=(const StageRuntime&) = delete;

  // Enqueues one iteration on `tokens` (this rank's micro-batches, each its inputs then its targets, as
  // executor/token_stream.hpp lays them out: as many as the embedding's and the output layer's units take).
  // With a timer, each op's launches form a CUPTI region
  // (traces/measured_ops.hpp's encoding of iteration and op index). Returns after the GPU finished.
  // The watchdog is armed while the iteration is issued and runs: a hang or a NCCL error ends the process.
  void run_iteration(int iteration, const std::vector<std::int32_t>& tokens, gpu::CuptiKernelTimer* timer,
                     Watchdog& watchdog);
  // Sum of this rank's per-token losses in the last iteration (non-zero on the last stage's TP rank 0 only).
  double last_loss_sum() const { return last_.loss_sum; }
  float last_iteration_ms() const { return last_.iteration_ms; }
  // Whether the part switches into its layout, and how long the last iteration's switch took: from the part's
  // start to its last unit's transfers (the switch runs beside the first units' compute).
  bool switches() const { return handlers_->layout_switch().switches(); }
  double last_switch_s() const { return last_.switch_s; }
  const RankClass& rank_class() const { return rc_; }
  // The last iteration's MoE routing: tokens per expert for each (micro-batch, MoE layer), and the load-balancing
  // losses summed over layers (each micro-batch's weighted 1/(M dp), as in the gradient). Empty and 0 when dense.
  const std::vector<ExpertLoad>& last_expert_loads() const;
  double last_aux_loss() const { return last_.aux_loss; }
  // The last iteration's global gradient norm before clipping (none without an optimizer op) and learning rate.
  std::optional<double> last_grad_norm() const { return last_.grad_norm; }
  double last_learning_rate() const { return last_.learning_rate; }
  // Bytes of device memory in use at the peak (static buffers plus the activation pool's high mark).
  std::size_t peak_memory_bytes() const;
  // What this runtime holds beside the parameters and the pool (its static buffers and GEMM workspaces).
  std::size_t own_bytes() const;
  const std::shared_ptr<StageParameters>& parameters() const { return params_; }
  // The events bracketing the last iteration on the compute stream (a step of several parts is timed from
  // its first part's start to its last part's end).
  cudaEvent_t last_start() const { return events_.start(); }
  cudaEvent_t last_end() const { return events_.end(); }

 private:
  struct IterationResult {
    double loss_sum = 0, switch_s = 0, aux_loss = 0, learning_rate = 0;
    std::optional<double> grad_norm;
    float iteration_ms = 0;
  };
  // Each compute stream's workspaces, and whether gradients need zeroing each step.
  void make_scratch();
  std::set<std::int32_t> units_stored_by_first_writers();
  bool gradients_need_zeroing(const StepPart& part);
  // Issues op `index` of the iteration: its waits, its injected fault, its CUPTI region, its dispatch.
  void issue(OpIndex index, int iteration, gpu::CuptiKernelTimer* timer);
  cudaStream_t stream_of(const Op& op) const { return streams_[static_cast<int>(op.stream)]; }
  cudaStream_t compute_stream() const { return streams_[static_cast<int>(Stream::compute)]; }
  // The first op whose completion event has not fired: where a stuck iteration is.
  std::string unfinished_op() const;

  const RankClass& rc_;
  int rank_ = 0;
  StageLayout layout_;
  std::vector<OpBinding> bindings_;
  std::shared_ptr<StageParameters> params_;
  std::array<cudaStream_t, kStreamCount> streams_{};
  std::array<StreamScratch, kStreamCount> scratch_;
  IssueEvents events_;
  TensorStore tensors_;
  std::unique_ptr<ActionHandlers> handlers_;
  // ZeRO >= 2's whole gradients and ZeRO-3's whole weights, made and freed around the ops that need them.
  std::unique_ptr<WeightResidencyRun> residency_;
  InjectedFault fault_;
  std::atomic<std::int64_t> issuing_op_{-1};  // the op the host is issuing (read by the watchdog thread)
  IterationResult last_;
};

}  // namespace twin::exec
