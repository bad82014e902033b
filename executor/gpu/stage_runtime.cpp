// Construction (streams, parameters, handlers, scratch) and one iteration's issue loop. Activations come from
// CUDA's stream-ordered pool: allocated on the stream of the op that writes them, freed on the stream of their last
// user, so the pool reuses memory as Megatron's caching allocator does.
#include "executor/gpu/stage_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/kernels.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

// Past the --nccl-timeout the fault test sets (20 s), and short enough that a process whose exit waited
// for the kernel would show it (it would end at about 90 s, not 20).
constexpr int kStallSeconds = 90;

// The widest rows a norm's or a bias's gradient reduces per block of rows: the hidden size (RMSNorm), twice it
// (LayerNorm: weight and bias), or a biased linear's whole output (QKV, FC1 as at TP 1: a per-layer plan's layers
// may run a narrower TP than the stage's).
std::int64_t partial_columns(const StageLayout& layout) {
  const ModelConfig& m = layout.scenario().model;
  const lowering::RankShapes& s = layout.shapes();
  std::int64_t cols = m.normalization == Normalization::layernorm ? 2 * s.h : s.h;
  if (m.add_bias_linear) cols = std::max({cols, s.qkv_width * s.tp, s.fc1_width * s.tp});
  // QK-norm's launch: tokens x (heads + groups) rows of head_dim, two weights' partials of head_dim each per
  // block, so min(rows, blocks) x 2 head_dim <= this x min(tokens, blocks).
  if (m.qk_layernorm) cols = std::max(cols, 2 * (s.heads + s.groups) * s.d);
  if (s.mla()) cols = std::max({cols, s.q_lora_rank, s.kv_lora_rank});  // MLA's latents' norms
  if (m.add_bias_linear && m.is_moe()) cols = std::max({cols, s.moe_fc1_width, s.experts_total});  // experts, router
  return cols;
}

// The rows a bias gradient's partials cover: a micro-batch's tokens, or under EP what one expert may receive (a
// copy of each token of every EP rank).
std::int64_t partial_rows(const StageLayout& layout) {
  const ModelConfig& m = layout.scenario().model;
  return layout.most_tokens() * (m.add_bias_linear && m.is_moe() ? layout.shapes().ep : 1);
}

// A bias gradient that a later micro-batch adds (written by a GEMM's epilogue first): a linear's, the router's, or
// every local expert's of one experts GEMM ([experts, out], added in one pass).
std::int64_t bias_grad_elements(const StageLayout& layout) {
  const lowering::RankShapes& s = layout.shapes();
  const bool experts = layout.scenario().model.is_moe();
  return std::max(partial_columns(layout), experts ? s.experts_local * std::max(s.moe_fc1_width, s.h) : 0);
}

std::uint64_t region_id(int iteration, OpIndex op) {
  return (static_cast<std::uint64_t>(iteration + 1) << 32) | static_cast<std::uint64_t>(op + 1);
}

}  // namespace

StageRuntime::StageRuntime(const PlanPart& plan_part, const IterationGraph& graph, const RankClass& rank_class,
                           int rank, Communicators& comms, const TrainingOptions& options, StepPart part)
    : rc_(rank_class), rank_(rank), layout_(plan_part, rank, comms),
      bindings_(bind_ops(rc_, !plan_part.scenario.model.untie_embeddings_and_output_weights,
                         plan_part.scenario.model.mla.enabled())),
      events_(rank_class), tensors_(rank_class.index) {
  const Scenario& scenario = plan_part.scenario;
  // A later part of the step adds to the gradients the parts before it stored.
  if (!part.first())
    for (OpBinding& b : bindings_) b.first_gradient = b.first_position_gradient = false;
  if (!plan_part.packs.empty() &&
      static_cast<std::int64_t>(plan_part.packs.size()) != scenario.training.global_batch_size)
    throw std::invalid_argument(fmt::format("executor: {} packs given for a batch of {} rows", plan_part.packs.size(),
                                            scenario.training.global_batch_size));
  for (cudaStream_t& stream : streams_) TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  // The pool keeps what it frees: the next micro-batch reuses it without going back to the driver.
  cudaMemPool_t pool = nullptr;
  int device = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
  TWIN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));
  params_ = part.parameters ? part.parameters
                             : std::make_shared<StageParameters>(
                                   scenario, plan_parameter_units(plan_part, rank, options.seed), compute_stream());
  handlers_ = std::make_unique<ActionHandlers>(
      HandlerStage{layout_, graph, rc_, bindings_, params_, tensors_, comms, rank_, compute_stream()}, options, part);
  make_scratch();
  handlers_->optimizer().zero_gradients_each_step(gradients_need_zeroing(part));
  handlers_->optimizer().starts_step(part.first());
  const ShardedUnits sharded = sharded_units(*params_);
  const StageWeights stage{!scenario.model.untie_embeddings_and_output_weights,
                           stage_holds_embedding(layout_.strategy(), layout_.me().pp)};
  // Each gradient window's first writers store into its fresh buffer, so a unit whose weights all have one is
  // zeroed in its padding and gaps only (after the step's zeroing verdict above, which these flags do not change).
  if (part.first()) mark_window_first_gradients(rc_, bindings_, sharded, stage);
  residency_ = std::make_unique<WeightResidencyRun>(
      WeightResidency(rc_, bindings_, sharded, stage), *params_,
      part.first() ? units_stored_by_first_writers() : std::set<std::int32_t>{});
  fault_ = injected_fault_from_environment();
  TWIN_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
}

// Each stream that runs compute ops gets its own GEMM workspace and norm partials (and the experts' GEMMs and sort).
void StageRuntime::make_scratch() {
  std::array<bool, kStreamCount> computes{};
  for (OpIndex i = 0; i < rc_.size(); ++i)
    computes[static_cast<int>(rc_.op(i).stream)] |= !rc_.op(i).is_communication();
  for (int s = 0; s < kStreamCount; ++s) {
    if (!computes[s]) continue;
    StreamScratch& scratch = scratch_[s];
    scratch.matmul = std::make_unique<Matmul>();
    if (handlers_->fp8()) scratch.fp8_matmul = std::make_unique<Fp8Matmul>(Matmul::kWorkspaceBytes);
    const std::size_t partials =
        kernels::norm_partial_floats(partial_rows(layout_), partial_columns(layout_));
    if (layout_.scenario().model.add_bias_linear) {
      const std::int64_t bias_grads = bias_grad_elements(layout_);  // also summed as one row through the partials
      scratch.norm_partials =
          static_cast<float*>(tensors_.static_buffer(std::max<std::size_t>(partials, bias_grads) * sizeof(float)));
      scratch.bias_grad = tensors_.static_buffer(bias_grads * sizeof(float));
    } else {
      scratch.norm_partials = static_cast<float*>(tensors_.static_buffer(partials * sizeof(float)));
    }
    if (!handlers_->moe()) continue;
    scratch.grouped = std::make_unique<GroupedMatmul>();
    scratch.moe_sort_workspace = tensors_.static_buffer(handlers_->moe()->sort_workspace_bytes());
  }
}

// The units each of whose weights' gradients a first op of the step stores: their buffers need no zeroing but their
// padding and gaps.
std::set<std::int32_t> StageRuntime::units_stored_by_first_writers() {
  std::set<std::pair<int, OpRole>> stored;
  for (OpIndex i = 0; i < rc_.size(); ++i) {
    const OpBinding& b = bindings_[i];
    if (!b.first_gradient) continue;
    const int unit = StageLayout::unit_of(rc_.op(i), b);
    if (b.action == Action::linear_weight_grad) {  // where the linear's weight is (a tied output: the table)
      const LinearWeight w = handlers_->dense().linear_weight(b.subject, unit);
      stored.insert({w.unit, w.role});
    } else {
      stored.insert({unit, b.subject});
    }
  }
  std::set<std::int32_t> units;
  for (ParameterUnit* unit : params_->units()) {
    const bool all = std::all_of(unit->tensors.begin(), unit->tensors.end(),
                                 [&](const WeightTensor& w) { return stored.count({unit->id, w.role}) > 0; });
    if (all) units.insert(unit->id);
  }
  return units;
}

// Every weight's gradient stored by a first op of the step? Then no per-step zeroing: padding and gaps stay the
// zeros they were allocated as. A later part of the step adds to what the parts before it left.
bool StageRuntime::gradients_need_zeroing(const StepPart& part) {
  return part.first() && units_stored_by_first_writers().size() != params_->units().size();
}

StageRuntime::~StageRuntime() {
  cudaDeviceSynchronize();
  params_.reset();
  for (StreamScratch& scratch : scratch_) scratch = {};
  for (cudaStream_t stream : streams_) cudaStreamDestroy(stream);
}

// ---- one iteration ----

void StageRuntime::run_iteration(int iteration, const std::vector<std::int32_t>& tokens,
                                 gpu::CuptiKernelTimer* timer, Watchdog& watchdog) {
  watchdog.arm(fmt::format("rank {} iteration {}", rank_, iteration), [this] {
    std::string where = unfinished_op();
    if (const std::int64_t issuing = issuing_op_; issuing >= 0)
      where += fmt::format(" (the host was issuing op {})", op_id(rc_.index, static_cast<OpIndex>(issuing)));
    return where;
  });
  cudaStream_t compute = compute_stream();
  handlers_->start_iteration(iteration, tokens, compute);
  tensors_.fail_next_allocation(fault_.kind == InjectedFault::out_of_memory && fault_.hits(rank_, iteration));
  TWIN_CUDA_CHECK(cudaEventRecord(events_.start(), compute));
  LayoutSwitch& layout_switch = handlers_->layout_switch();
  layout_switch.run(events_.start(), compute);
  for (cudaStream_t stream : streams_) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, layout_switch.switched()));
  for (OpIndex i = 0; i < rc_.size(); ++i) issue(i, iteration, timer);
  for (int s = 0; s < kStreamCount; ++s) {
    if (streams_[s] == compute) continue;
    TWIN_CUDA_CHECK(cudaEventRecord(events_.stream_done(s), streams_[s]));
    TWIN_CUDA_CHECK(cudaStreamWaitEvent(compute, events_.stream_done(s)));
  }
  layout_switch.join(compute);
  issuing_op_ = -1;
  TWIN_CUDA_CHECK(cudaEventRecord(events_.end(), compute));
  TWIN_CUDA_CHECK(cudaEventSynchronize(events_.end()));
  watchdog.disarm();
  TWIN_CUDA_CHECK(cudaEventElapsedTime(&last_.iteration_ms, events_.start(), events_.end()));
  if (layout_switch.switches()) last_.switch_s = layout_switch.seconds_since(events_.start());
  last_.loss_sum = handlers_->dense().loss_sum();
  last_.aux_loss = handlers_->moe() ? handlers_->moe()->aux_loss() : 0;
  last_.grad_norm = handlers_->optimizer().last_grad_norm();
  last_.learning_rate = handlers_->optimizer().last_learning_rate();
  tensors_.check_empty();
}

void StageRuntime::issue(OpIndex i, int iteration, gpu::CuptiKernelTimer* timer) {
  issuing_op_ = i;
  const Op& op = rc_.op(i);
  cudaStream_t stream = stream_of(op);
  for (OpIndex from : events_.waits(i)) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, events_.op_done(from)));
  const OpBinding& binding = bindings_[i];
  const int unit = StageLayout::unit_of(op, binding);
  handlers_->layout_switch().wait_for_units(op, binding, unit, stream);
  if (fault_.kind == InjectedFault::stall && fault_.hits(rank_, iteration) && i == 0) {
    spdlog::warn("rank {}: injected fault: a kernel that does not finish before op {} ({})", rank_,
                 op_id(rc_.index, i), op_name(op));
    kernels::stall_stream(kStallSeconds, stream);
  }
  if (fault_.kind == InjectedFault::hang && fault_.hits(rank_, iteration) && op.is_communication()) {
    spdlog::warn("rank {}: injected fault: hanging before op {} ({})", rank_, op_id(rc_.index, i), op_name(op));
    std::this_thread::sleep_for(std::chrono::hours(1));
  }
  bool in_region = false;  // the whole buffers' allocations and zeroing stay outside the op's CUPTI region
  try {
    residency_->before(i, stream, events_);
    if (timer) {
      timer->begin_region(region_id(iteration, i));
      in_region = true;
    }
    handlers_->run(OpPass{op, binding, op.micro_batch, unit, scratch_[static_cast<int>(op.stream)], stream});
    if (in_region) {
      timer->end_region();
      in_region = false;
    }
    residency_->after(i, stream);
  } catch (const std::exception& error) {
    if (in_region) timer->end_region();
    throw std::runtime_error(fmt::format("rank {} op {} ({}): {}", rank_, op_id(rc_.index, i), op_name(op),
                                         error.what()));
  }
  TWIN_CUDA_CHECK(cudaEventRecord(events_.op_done(i), stream));
}

std::string StageRuntime::unfinished_op() const {
  for (OpIndex i = 0; i < rc_.size(); ++i)
    if (cudaEventQuery(events_.op_done(i)) == cudaErrorNotReady)
      return fmt::format("op {} ({}, {} stream)", op_id(rc_.index, i), op_name(rc_.op(i)), to_string(rc_.op(i).stream));
  return "the iteration's last wait";
}

std::size_t StageRuntime::peak_memory_bytes() const {
  int device = 0;
  cudaMemPool_t pool = nullptr;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t pool_high = 0;
  TWIN_CUDA_CHECK(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &pool_high));
  return own_bytes() + params_->allocated_bytes() + pool_high;
}

const std::vector<ExpertLoad>& StageRuntime::last_expert_loads() const {
  static const std::vector<ExpertLoad> kDense;
  return handlers_->moe() ? handlers_->moe()->loads() : kDense;
}

std::size_t StageRuntime::own_bytes() const {
  std::size_t workspaces = 0;
  for (const StreamScratch& scratch : scratch_)
    workspaces += (scratch.matmul ? Matmul::kWorkspaceBytes : 0) + (scratch.fp8_matmul ? Matmul::kWorkspaceBytes : 0);
  return tensors_.static_bytes() + workspaces + (handlers_->pipeline_reduction() ? handlers_->pipeline_reduction()->allocated_bytes() : 0);
}

}  // namespace twin::exec
