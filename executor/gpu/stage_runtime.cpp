// Construction (streams, events, parameters, scratch), tensor bookkeeping, and one iteration's issue loop.
// Activations come from CUDA's stream-ordered pool: allocated on the stream of the op that writes them,
// freed on the stream of their last user, so the pool reuses memory as Megatron's caching allocator does.
#include "executor/gpu/stage_runtime.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <set>
#include <utility>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "executor/event_waits.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/kernels.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin::exec {
namespace {

// Past the --nccl-timeout the fault test sets (20 s), and short enough that a process whose exit waited
// for the kernel would show it (it would end at about 90 s, not 20).
constexpr int kStallSeconds = 90;

std::uint64_t region_id(int iteration, OpIndex op) {
  return (static_cast<std::uint64_t>(iteration + 1) << 32) | static_cast<std::uint64_t>(op + 1);
}

}  // namespace

StageRuntime::StageRuntime(const PlanPart& plan_part, const IterationGraph& graph, const RankClass& rank_class,
                           int rank, Communicators& comms, const TrainingOptions& options, StepPart part)
    : plan_part_(plan_part), scenario_(plan_part.scenario), strategy_(plan_part.strategy), graph_(graph),
      rc_(rank_class), rank_(rank), me_(coordinates_of(strategy_, plan_part.layout_rank(rank))), comms_(comms), options_(options),
      shapes_(lowering::rank_shapes(scenario_, strategy_)),
      bindings_(bind_ops(rc_, !scenario_.model.untie_embeddings_and_output_weights)), part_(std::move(part)),
      tensors_(rank_class.index) {
  const Scenario& scenario = scenario_;
  const Strategy& strategy = strategy_;
  // A later part of the step adds to the gradients the parts before it stored.
  if (!part_.first())
    for (OpBinding& b : bindings_) b.first_gradient = false;
  if (!plan_part_.packs.empty() &&
      static_cast<std::int64_t>(plan_part_.packs.size()) != scenario.training.global_batch_size)
    throw std::invalid_argument(fmt::format("executor: {} packs given for a batch of {} rows", plan_part_.packs.size(),
                                            scenario.training.global_batch_size));
  const auto layout_under = [&](const Strategy& weights, const lowering::RankShapes& shapes, int group, bool ulysses) {
    const Communicators::Layout& moves = comms_.layout(group);
    return UnitLayout{shapes, coordinates_of(weights, plan_part_.layout_rank(rank)).tp, ulysses, moves.tensor, moves.tensor_optimizer,
                      comms_.layout(weights.tensor_model_parallel_size).data};
  };
  home_layout_ = layout_under(strategy, shapes_, strategy.tensor_model_parallel_size, false);
  if (plan_part_.per_layer()) {
    std::vector<int> units = {kEmbeddingUnit, kHeadUnit};
    for (int layer = 0; layer < scenario.model.num_layers; ++layer) units.push_back(layer);
    for (int unit : units) {
      const UnitExecution& execution = *plan_part_.unit_execution(unit);
      unit_layouts_.emplace(unit, layout_under(execution.weights, execution.shapes, execution.group,
                                               execution.ulysses));
    }
  }
  for (cudaStream_t& stream : streams_) TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  attention_ = std::make_unique<gpu::Attention>(options.attention);
  ring_ = std::make_unique<ContextRingRun>(RingStage{shapes_, me_.cp, comms_, tensors_, *attention_});
  cudaStream_t compute = streams_[static_cast<int>(Stream::compute)];

  // The pool keeps what it frees: the next micro-batch reuses it without going back to the driver.
  cudaMemPool_t pool = nullptr;
  int device = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
  std::uint64_t keep_all = std::numeric_limits<std::uint64_t>::max();
  TWIN_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all));

  params_ = part_.parameters ? part_.parameters
                             : std::make_shared<StageParameters>(scenario, plan_parameter_units(plan_part_, rank,
                                                                                                options.seed),
                                                                 compute);

  if (part_.pipeline_reductions && !part_.pipeline_reductions->empty())
    pipeline_reduction_ = std::make_unique<PipelineReductionRun>(
        *part_.pipeline_reductions, rank, comms_, *params_,
        part_.optimizer_sharded_over_pipelines ? &scenario.training.optimizer_precision : nullptr, compute);

  // Cross-stream dependencies become event waits (executor/event_waits.hpp). Every op records its event: the
  // watchdog names the first one that did not complete when an iteration hangs.
  op_done_.assign(rc_.size(), nullptr);
  for (cudaEvent_t& done : op_done_) TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  waits_ = event_waits(rc_);
  fault_ = injected_fault_from_environment();
  TWIN_CUDA_CHECK(cudaEventCreate(&iteration_start_));
  TWIN_CUDA_CHECK(cudaEventCreate(&iteration_end_));
  TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&switched_, cudaEventDisableTiming));
  if (part_.switch_from) {
    TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&switch_stream_, cudaStreamNonBlocking));
    TWIN_CUDA_CHECK(cudaEventCreate(&switch_done_));  // timed from iteration_start_
    if (part_.switch_from != params_) switch_units_ = blocks_by_unit(part_.switch_blocks);
    for (const auto& [unit, blocks] : switch_units_)
      TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&unit_switched_[unit], cudaEventDisableTiming));
  }
  stream_done_.resize(kStreamCount);
  for (cudaEvent_t& event : stream_done_) TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));

  const int chunks = chunks_per_stage(strategy);
  last_virtual_stage_ = strategy.pipeline_model_parallel_size * chunks - 1;
  for (int chunk = 0; chunk < chunks; ++chunk) {
    const int first = first_layer_of(scenario.model, strategy, me_.pp, chunk);
    chunk_layers_[chunk] = {first, first + layers_in_virtual_stage(scenario.model, strategy,
                                                                   virtual_stage_of(strategy, me_.pp, chunk))};
  }
  if (!plan_part_.stage_layers.empty())  // a per-layer plan's split (no virtual stages)
    chunk_layers_[0] = {plan_part_.first_layer(me_.pp), plan_part_.first_layer(me_.pp + 1)};

  // The most rows a unit's TP-gathered activations take (layouts differ in samples per micro-batch).
  std::int64_t tokens = shapes_.tokens;
  for (const auto& [unit, layout] : unit_layouts_) tokens = std::max(tokens, layout.shapes.tokens);
  const std::int64_t h = shapes_.h;
  tokens_ = static_cast<std::int32_t*>(
      tensors_.static_buffer(strategy.num_micro_batches * (input_tokens() + target_tokens()) * sizeof(std::int32_t)));
  // Positions of the whole sequence: under context parallelism a rank's chunks sit anywhere in it.
  const std::int64_t positions = shapes_.s * shapes_.cp;
  rope_table_ = static_cast<float2*>(tensors_.static_buffer(positions * (shapes_.d / 2) * sizeof(float2)));
  kernels::rope_build_table(rope_table_, positions, static_cast<int>(shapes_.d), 10000.0f, compute);
  loss_sum_ = static_cast<float*>(tensors_.static_buffer(sizeof(float)));
  grad_partials_ = static_cast<float*>(tensors_.static_buffer(kernels::grad_norm_partial_count() * sizeof(float)));
  grad_sum_squares_ = static_cast<float*>(tensors_.static_buffer(sizeof(float)));
  clip_scale_ = static_cast<float*>(tensors_.static_buffer(sizeof(float)));
  for (ParameterUnit* unit : params_->units())
    if (unit->id == kEmbeddingUnit) {
      embedding_workspace_bytes_ = kernels::embedding_backward_workspace_bytes(input_tokens());
      embedding_workspace_ = tensors_.static_buffer(embedding_workspace_bytes_);
    }
  if (scenario.model.is_moe())
    moe_ = std::make_unique<MoeBlock>(MoeStage{
        shapes_, scenario.model.moe.top_k, placement_of(strategy, rank).ep_rank, comms_, *params_, tensors_,
        options.moe_aux_loss_coeff, part_.micro_batches > 0 ? part_.micro_batches : strategy.num_micro_batches,
        strategy.data_parallel_size});
  std::array<bool, kStreamCount> computes{};
  for (OpIndex i = 0; i < rc_.size(); ++i)
    computes[static_cast<int>(rc_.op(i).stream)] |= !rc_.op(i).is_communication();
  for (int s = 0; s < kStreamCount; ++s) {
    if (!computes[s]) continue;
    StreamScratch& scratch = scratch_[s];
    scratch.matmul = std::make_unique<Matmul>();
    scratch.norm_partials = static_cast<float*>(tensors_.static_buffer(kernels::norm_partial_floats(tokens, h) * sizeof(float)));
    if (!scenario.model.is_moe()) continue;
    scratch.grouped = std::make_unique<GroupedMatmul>();
    scratch.moe_sort_workspace = tensors_.static_buffer(moe_->sort_workspace_bytes());
  }
  // Every weight's gradient stored by a first op of the step? Then no per-step zeroing: padding and gaps stay
  // the zeros they were allocated as.
  std::set<std::pair<int, OpRole>> stored;
  for (OpIndex i = 0; i < rc_.size(); ++i) {
    const OpBinding& b = bindings_[i];
    if (!b.first_gradient) continue;
    const int unit = unit_of(rc_.op(i), b);
    if (b.action == Action::linear_weight_grad) {  // where the linear's weight is (a tied output: the table)
      const LinearWeight w = linear_weight(b.subject, unit);
      stored.insert({w.unit, w.role});
    } else {
      stored.insert({unit, b.subject});
    }
  }
  zero_grads_each_step_ = false;
  for (ParameterUnit* unit : params_->units())
    for (const WeightTensor& w : unit->tensors) zero_grads_each_step_ |= part_.first() && !stored.count({unit->id, w.role});
  TWIN_CUDA_CHECK(cudaStreamSynchronize(compute));
}

const StageRuntime::UnitLayout& StageRuntime::layout(int unit) const {
  const auto found = unit_layouts_.find(unit);
  return found == unit_layouts_.end() ? home_layout_ : found->second;
}

StageRuntime::~StageRuntime() {
  cudaDeviceSynchronize();
  for (cudaEvent_t event : op_done_) cudaEventDestroy(event);
  for (cudaEvent_t event : stream_done_) cudaEventDestroy(event);
  cudaEventDestroy(iteration_start_);
  cudaEventDestroy(iteration_end_);
  cudaEventDestroy(switched_);
  if (switch_done_) cudaEventDestroy(switch_done_);
  for (auto& [unit, event] : unit_switched_) cudaEventDestroy(event);
  if (switch_stream_) cudaStreamDestroy(switch_stream_);
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
  cudaStream_t compute = streams_[static_cast<int>(Stream::compute)];
  const auto expected = static_cast<std::size_t>(strategy_.num_micro_batches * (input_tokens() + target_tokens()));
  if (tokens.size() != expected)
    throw std::invalid_argument(fmt::format("executor: {} input and target tokens given, {} expected", tokens.size(),
                                            expected));
  TWIN_CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens.data(), tokens.size() * sizeof(std::int32_t),
                                  cudaMemcpyHostToDevice, compute));
  if (zero_grads_each_step_) params_->zero_grads(compute);
  TWIN_CUDA_CHECK(cudaMemsetAsync(loss_sum_, 0, sizeof(float), compute));
  if (moe_) moe_->start_iteration(iteration, compute);
  fixups_done_ = false;
  tensors_.fail_next_allocation(fault_.kind == InjectedFault::out_of_memory && fault_.hits(rank_, iteration));
  TWIN_CUDA_CHECK(cudaEventRecord(iteration_start_, compute));
  switch_into(compute);
  for (cudaStream_t stream : streams_) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, switched_));

  for (OpIndex i = 0; i < rc_.size(); ++i) {
    issuing_op_ = i;
    cudaStream_t stream = streams_[static_cast<int>(rc_.op(i).stream)];
    for (OpIndex from : waits_[i]) TWIN_CUDA_CHECK(cudaStreamWaitEvent(stream, op_done_[from]));
    wait_for_switch(i, stream);
    if (fault_.kind == InjectedFault::stall && fault_.hits(rank_, iteration) && i == 0) {
      spdlog::warn("rank {}: injected fault: a kernel that does not finish before op {} ({})", rank_,
                   op_id(rc_.index, i), op_name(rc_.op(i)));
      kernels::stall_stream(kStallSeconds, stream);
    }
    if (fault_.kind == InjectedFault::hang && fault_.hits(rank_, iteration) && rc_.op(i).is_communication()) {
      spdlog::warn("rank {}: injected fault: hanging before op {} ({})", rank_, op_id(rc_.index, i), op_name(rc_.op(i)));
      std::this_thread::sleep_for(std::chrono::hours(1));
    }
    if (timer) timer->begin_region(region_id(iteration, i));
    try {
      run_op(i, iteration);
    } catch (const std::exception& error) {
      if (timer) timer->end_region();
      throw std::runtime_error(fmt::format("rank {} op {} ({}): {}", rank_, op_id(rc_.index, i), op_name(rc_.op(i)),
                                           error.what()));
    }
    if (timer) timer->end_region();
    TWIN_CUDA_CHECK(cudaEventRecord(op_done_[i], stream));
  }

  for (int s = 0; s < kStreamCount; ++s) {
    if (streams_[s] == compute) continue;
    TWIN_CUDA_CHECK(cudaEventRecord(stream_done_[s], streams_[s]));
    TWIN_CUDA_CHECK(cudaStreamWaitEvent(compute, stream_done_[s]));
  }
  if (switch_done_) TWIN_CUDA_CHECK(cudaStreamWaitEvent(compute, switch_done_));
  issuing_op_ = -1;
  TWIN_CUDA_CHECK(cudaEventRecord(iteration_end_, compute));
  TWIN_CUDA_CHECK(cudaEventSynchronize(iteration_end_));
  watchdog.disarm();
  TWIN_CUDA_CHECK(cudaEventElapsedTime(&last_iteration_ms_, iteration_start_, iteration_end_));
  if (switch_done_) {
    float switch_ms = 0;
    TWIN_CUDA_CHECK(cudaEventElapsedTime(&switch_ms, iteration_start_, switch_done_));
    last_switch_s_ = switch_ms / 1e3;
  }
  float loss_sum = 0;
  TWIN_CUDA_CHECK(cudaMemcpy(&loss_sum, loss_sum_, sizeof(float), cudaMemcpyDeviceToHost));
  last_loss_sum_ = loss_sum;
  last_aux_loss_ = moe_ ? moe_->aux_loss() : 0;
  tensors_.check_empty();
}

std::string StageRuntime::unfinished_op() const {
  for (OpIndex i = 0; i < rc_.size(); ++i)
    if (cudaEventQuery(op_done_[i]) == cudaErrorNotReady)
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
  return moe_ ? moe_->loads() : kDense;
}

std::size_t StageRuntime::own_bytes() const {
  std::size_t workspaces = 0;
  for (const StreamScratch& scratch : scratch_) workspaces += scratch.matmul ? Matmul::kWorkspaceBytes : 0;
  return tensors_.static_bytes() + workspaces + (pipeline_reduction_ ? pipeline_reduction_->allocated_bytes() : 0);
}

}  // namespace twin::exec
