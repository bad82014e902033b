// The per-rank interpreter: runs the op graph of the rank's class, op for op, each op as real kernels or
// NCCL calls on the stream the graph gives it, with an event wait for every cross-stream dependency of
// the graph, so that the overlap the simulator assumed is the overlap that happens. Activations live per
// (micro-batch, parameter unit) and are freed where Megatron frees them (after the unit's backward; after
// the forward under full recompute; gathered SP inputs right after their GEMM).
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "core/layer.hpp"
#include "core/op_graph.hpp"
#include "core/scenario.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/gpu/context_ring_run.hpp"
#include "gpu/attention.hpp"
#include "gpu/grouped_matmul.hpp"
#include "gpu/matmul.hpp"
#include "executor/expert_exchange.hpp"
#include "executor/op_binding.hpp"
#include "executor/resharding.hpp"
#include "executor/run_report.hpp"
#include "executor/gpu/pipeline_reduction_run.hpp"
#include "executor/gpu/moe_block.hpp"
#include "executor/gpu/stage_parameters.hpp"
#include "executor/gpu/stream_scratch.hpp"
#include "executor/gpu/tensor_store.hpp"
#include "executor/watchdog.hpp"
#include "strategies/lowering_emitter.hpp"

namespace twin::gpu {
class CuptiKernelTimer;
}

namespace twin::exec {

struct TrainingOptions {
  float learning_rate = 3e-4f;
  float max_grad_norm = 1.0f;
  std::uint64_t seed = 1234;
  double nccl_timeout_s = 300;  // an iteration that does not finish by then is a hang
  AttentionImplementation attention = kDefaultAttentionImplementation;
  // Weight of the Switch load-balancing loss of each MoE layer (Megatron's --moe-aux-loss-coeff; 1e-2 as in
  // Megatron-LM's Mixtral example).
  double moe_aux_loss_coeff = 1e-2;
};

// Where a runtime's iteration sits in a training step that runs several parts one after another (hot switching's
// phases, strategies/families/plan_graphs.hpp); the defaults describe a step of one part.
struct StepPart {
  // The part's parameters, shared by the parts of one layout (null: the runtime makes its own).
  std::shared_ptr<StageParameters> parameters;
  // A later part of the step: its gradients start from the earlier parts' (the switch into it puts them where
  // its reduction adds them in once) and every weight-gradient op adds to them.
  bool adds_gradients = false;
  bool first() const { return !adds_gradients; }
  std::int64_t loss_tokens = 0;    // tokens the step's loss averages over; 0: this part's global batch
  std::int64_t micro_batches = 0;  // micro-batches per data-parallel rank over the whole step; 0: this part's
  // The switch into the part, run at the start of its iteration (timed with it): from the parameters of the part
  // before (the step's last part for the first), by `switch_blocks` (executor/resharding.hpp) over
  // `switch_comm` when they are another layout's. Null: no switch (a step of one part).
  std::shared_ptr<StageParameters> switch_from;
  std::vector<ReshardBlock> switch_blocks;
  ncclComm_t switch_comm = nullptr;
  // An asymmetric plan's gradient reductions across its pipelines (every rank's; empty for one pipeline): the
  // graph's ring ops run them (Action::pipelines_reduce).
  std::shared_ptr<const std::vector<PipelineReduction>> pipeline_reductions;
  bool optimizer_sharded_over_pipelines = false;  // its ZeRO-1: the AdamW state lives in the reductions' parts
};

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
  double last_loss_sum() const { return last_loss_sum_; }
  float last_iteration_ms() const { return last_iteration_ms_; }
  // Whether the part switches into its layout, and how long the last iteration's switch took: from the part's
  // start to its last unit's transfers (the switch runs beside the first units' compute).
  bool switches() const { return switch_done_ != nullptr; }
  double last_switch_s() const { return last_switch_s_; }
  const RankClass& rank_class() const { return rc_; }
  // The last iteration's MoE routing: tokens per expert for each (micro-batch, MoE layer), and the load-balancing
  // losses summed over layers (each micro-batch's weighted 1/(M dp), as in the gradient). Empty and 0 when dense.
  const std::vector<ExpertLoad>& last_expert_loads() const;
  double last_aux_loss() const { return last_aux_loss_; }
  // Bytes of device memory in use at the peak (static buffers plus the activation pool's high mark).
  std::size_t peak_memory_bytes() const;
  // What this runtime holds beside the parameters and the pool (its static buffers and GEMM workspaces).
  std::size_t own_bytes() const;
  const std::shared_ptr<StageParameters>& parameters() const { return params_; }
  // The events bracketing the last iteration on the compute stream (a step of several parts is timed from
  // its first part's start to its last part's end).
  cudaEvent_t last_start() const { return iteration_start_; }
  cudaEvent_t last_end() const { return iteration_end_; }

 private:
  // A linear's weight: [in, out] in its unit, or, for a tied output projection, the embedding table (or its
  // copy) stored [out, in] = [vocab, hidden].
  struct LinearWeight {
    __nv_bfloat16* params = nullptr;
    __nv_bfloat16* grads = nullptr;
    std::int64_t in = 0, out = 0;
    bool stored_out_by_in = false;
    int unit = 0;                 // the parameter unit and tensor that hold it (and its gradient)
    OpRole role = OpRole::none;
  };
  LinearWeight linear_weight(OpRole subject, int unit);

  // ---- ops (op_actions.cpp) ----
  void run_op(OpIndex index, int iteration);
  int unit_of(const Op& op, const OpBinding& b) const;
  int previous_unit(int unit, int chunk) const;   // the unit whose output feeds `unit` (kRecv... for a received input)
  void linear(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  void tensor_collective(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  void norm(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  void residual(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  // The stream input of a residual block (the unit's input is the previous unit's output), and what follows
  // a forward residual add wherever it runs (its own op, or a GEMM's epilogue).
  const __nv_bfloat16* residual_stream(int mb, int unit, int chunk, const layer::Block& residual);
  void residual_forward_done(const Op& op, int mb, int unit, const layer::Block& residual, cudaStream_t stream);
  // The name under which a layer's output gradient arrives from the unit after it on this stage: the part
  // through that unit's norm, which the layer's MLP residual backward adds the stream's part to; with residual
  // fusion, the whole gradient (that norm's backward added the stream's part, and no residual op follows).
  Act arriving_output_gradient() const;
  // RoPE, attention and the MLP activation: the ops between the linears of a layer.
  void between_linears(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  // A micro-batch's rows as runs of sequences of one length (a row packing several sequences, a pack, is
  // cut into its sequences; its unfilled end is one more): RoPE and attention run once per run.
  struct SequenceRun {
    std::int64_t first_token = 0, sequences = 0, length = 0;
  };
  std::vector<SequenceRun> sequence_runs(int mb, const lowering::RankShapes& shapes) const;
  Recompute recompute_of(int layer) const { return plan_part_.unit_strategy(layer).recompute; }
  // A unit's layout: the shapes it runs with, this rank's place among the GPUs its weights are split over,
  // and the communicators of its groups: `tensor` (its TP group, or the Ulysses group of its all-to-alls) and
  // its weights' data group. Every unit has the part strategy's, but in a per-layer plan, whose layers (and
  // the embedding and output layer beside them) each run as their UnitExecution says.
  struct UnitLayout {
    lowering::RankShapes shapes;
    int tp_rank = 0;
    bool ulysses = false;
    ncclComm_t tensor = nullptr, tensor_optimizer = nullptr, data = nullptr;
  };
  // A Ulysses layer's all-to-all (op_actions_ulysses.cpp): the tensor the op names, between the sequence layout
  // (this GPU's rows, every head) and the heads layout (the group's rows, this GPU's heads).
  void ulysses_exchange(const Op& op, const OpBinding& b, int mb, int unit, cudaStream_t stream);
  const UnitLayout& layout(int unit) const;
  // Rows of a micro-batch's inputs (the embedding's) and targets (the output layer's) in `tokens_`.
  std::int64_t input_tokens() const { return layout(kEmbeddingUnit).shapes.tokens; }
  std::int64_t target_tokens() const { return layout(kHeadUnit).shapes.tokens; }
  // The stage of the class a pipeline op names as its peer.
  int peer_stage(const Op& op) const { return graph_.classes.at(static_cast<std::size_t>(op.peer)).stage; }
  void head(const Op& op, const OpBinding& b, int mb, cudaStream_t stream);
  void embedding(const Op& op, const OpBinding& b, int mb, cudaStream_t stream);
  void pipeline(const Op& op, const OpBinding& b, int mb, cudaStream_t stream);
  void parameters_collective(const Op& op, const OpBinding& b, cudaStream_t stream);
  void optimizer(const Op& op, const OpBinding& b, cudaStream_t stream);
  RingPass ring_pass(const Op& op, const OpBinding& b, cudaStream_t stream) const;
  // An MoE layer's experts block (executor/gpu/moe_block.hpp), and one of its ops.
  MoeBlock& moe_block();
  MoePass moe_pass(const Op& op, const OpBinding& b, cudaStream_t stream);
  void model_parallel_gradient_fixups(cudaStream_t stream);

  const PlanPart& plan_part_;
  const Scenario& scenario_;
  const Strategy& strategy_;
  const IterationGraph& graph_;
  const RankClass& rc_;
  int rank_ = 0;
  RankCoordinates me_;
  Communicators& comms_;
  TrainingOptions options_;
  lowering::RankShapes shapes_;  // the part strategy's
  UnitLayout home_layout_;       // the part strategy's
  std::map<int, UnitLayout> unit_layouts_;  // the units of a per-layer plan
  std::vector<OpBinding> bindings_;
  StepPart part_;
  std::shared_ptr<StageParameters> params_;
  std::array<cudaStream_t, kStreamCount> streams_{};
  std::array<StreamScratch, kStreamCount> scratch_;
  StreamScratch& scratch(const Op& op) { return scratch_[static_cast<int>(op.stream)]; }
  std::unique_ptr<gpu::Attention> attention_;     // one cuDNN handle; the stream is set per call
  std::vector<cudaEvent_t> op_done_;               // per op: recorded after it (waits, and where a hang is)
  std::vector<std::vector<OpIndex>> waits_;        // per op: cross-stream predecessors
  cudaEvent_t iteration_start_ = nullptr, iteration_end_ = nullptr;
  // The switch into this part (StepPart), on a stream of its own: the gradients zeroed where the part starts
  // them from zero (every stream waits for `switched_`, recorded then), then unit by unit in model order (one NCCL
  // group each) the unit's rectangles, its event recorded after them; an op touching a unit's weights or
  // gradients waits for that unit's event on its stream (wait_for_switch), as the simulator lets a unit's first
  // compute wait for its own transfers only. The graph's transfer ops (Action::switch_transfer) mark its place.
  void switch_into(cudaStream_t compute);
  void wait_for_switch(OpIndex index, cudaStream_t stream);
  cudaEvent_t switched_ = nullptr, switch_done_ = nullptr;
  cudaStream_t switch_stream_ = nullptr;
  std::vector<std::pair<std::int32_t, std::vector<ReshardBlock>>> switch_units_;
  std::map<std::int32_t, cudaEvent_t> unit_switched_;
  std::set<std::pair<int, std::int32_t>> switch_waited_;  // (stream, unit) waited for this iteration
  std::vector<cudaEvent_t> stream_done_;
  TensorStore tensors_;
  std::unique_ptr<MoeBlock> moe_;  // MoE models only
  std::unique_ptr<ContextRingRun> ring_;  // context parallelism's ring attention
  std::map<int, std::pair<int, int>> chunk_layers_;  // chunk -> [first layer, end)
  int last_virtual_stage_ = 0;
  // Inputs and scalars.
  std::int32_t* tokens_ = nullptr;                 // [micro_batches][tokens + 1]
  float2* rope_table_ = nullptr;
  float* loss_sum_ = nullptr;                      // device scalar
  void* embedding_workspace_ = nullptr;
  std::size_t embedding_workspace_bytes_ = 0;
  float* grad_partials_ = nullptr;
  float* grad_sum_squares_ = nullptr;
  float* clip_scale_ = nullptr;
  bool fixups_done_ = false;
  double last_aux_loss_ = 0;
  // An asymmetric plan's reductions across pipelines; null without them. Then every gradient is the sum over the
  // pipelines after its segment's reduction, a sequence-parallel stage's replicated weights' included.
  std::unique_ptr<PipelineReductionRun> pipeline_reduction_;
  // False when every weight's gradient is stored by its first op of a step (OpBinding::first_gradient): then
  // the gradient buffers are not zeroed per iteration.
  bool zero_grads_each_step_ = true;
  InjectedFault fault_;
  std::atomic<std::int64_t> issuing_op_{-1};  // the op the host is issuing (read by the watchdog thread)
  // The first op whose completion event has not fired: where a stuck iteration is.
  std::string unfinished_op() const;
  int step_ = 0;
  double last_loss_sum_ = 0;
  float last_iteration_ms_ = 0;
  double last_switch_s_ = 0;
};

// Pseudo unit of a chunk's received input activations: kReceivedUnit - chunk.
inline constexpr int kReceivedUnit = -10;

}  // namespace twin::exec
