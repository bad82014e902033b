// The launch (checks, one process per GPU) and each rank's training loop: data, iterations, the loss
// summed over ranks, timings, and the rank's report in the run folder; rank 0 writes the summary.
#include "executor/gpu/execute.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "gpu/attention.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/launcher.hpp"
#include "core/atomic_file.hpp"
#include "executor/gpu/clock_sampler.hpp"
#include "executor/gpu/communicators.hpp"
#include "executor/explicit_groups.hpp"
#include "executor/layout_groups.hpp"
#include "executor/pipeline_reduction.hpp"
#include "executor/plan_check.hpp"
#include "executor/resharding.hpp"
#include "executor/run_report.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "executor/gpu/world_sum.hpp"
#include "executor/token_stream.hpp"
#include "executor/watchdog.hpp"
#include "core/plan_file.hpp"
#include "strategies/families/plan_graphs.hpp"
#include "strategies/families/rank_plan.hpp"
#include "strategies/flops.hpp"
#include "strategies/layout_switch.hpp"
#include "traces/measured_ops.hpp"

namespace twin::exec {
namespace {

using nlohmann::json;

// The watchdog's view of this rank's NCCL communicators (a hot-switching plan's layouts' too).
WatchdogHooks nccl_watchdog_hooks(Communicators& comms, const std::vector<std::unique_ptr<Communicators>>& others) {
  return {[&comms, &others] {
            std::string error = comms.async_error();
            for (const auto& other : others)
              if (error.empty() && other) error = other->async_error();
            return error;
          },
          [&comms, &others] {
            for (const auto& other : others)
              if (other) other->abort_all();
            comms.abort_all();
          }};
}

// CUPTI's kernel records as the run files keep them (memcpys are not ops).
void append_kernels(RankRun& run, const std::vector<gpu::KernelRecord>& records) {
  for (const gpu::KernelRecord& r : records) {
    if (r.is_memcpy) continue;
    run.kernels.push_back(measured_kernel(r.name, r.start_ns, r.end_ns, r.stream_id, r.region));
  }
}

// A failed rank reports and leaves at once: destructors would wait on GPU work that may never finish
// (a collective whose peers go on, or a hung one), and the launcher stops the other ranks when one exits
// non-zero. So the handler must run before the runtimes' destructors: inside their scope.
[[noreturn]] void report_and_leave(const std::exception& error) {
  spdlog::error("{}", error.what());
  spdlog::default_logger()->flush();
  std::fflush(nullptr);
  std::_Exit(1);
}

// Everything a rank holds across the steps: its communicators (each layout's), the parts' parameters and runtimes.
struct RankParts {
  const PlanGraphs& lowered;
  std::vector<PlanPart> here;  // as this GPU runs them
  std::vector<std::size_t> layout_of;  // per part, the first part of its parameter layout
  std::vector<TokenShare> shares;      // per part, the sequences this GPU reads
  std::shared_ptr<const std::vector<PipelineReduction>> pipeline_reductions;
  std::unique_ptr<Communicators> comms;
  std::vector<std::unique_ptr<Communicators>> layout_comms;
  std::vector<std::shared_ptr<StageParameters>> parameters;
  std::vector<std::unique_ptr<StageRuntime>> runtimes;
  Communicators& comms_of(std::size_t p) { return layout_comms[layout_of[p]] ? *layout_comms[layout_of[p]] : *comms; }
};

// The communicators of every layout the step's parts run in: the groups the family states (an asymmetric plan's
// stages, boundaries and the sets of GPUs that reduce the same elements across replicas), else the strategy's
// layout and the other TP sizes of its units, and a communicator set per part of another parameter layout.
void make_communicators(RankParts& rank, const Strategy& strategy, const gpu::RankIdentity& identity) {
  const PlanGraphs& lowered = rank.lowered;
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));  // with NCCL_COMM_ID set, every rank derives the same id
  rank.pipeline_reductions = std::make_shared<const std::vector<PipelineReduction>>(plan_pipeline_reduction(lowered));
  const std::optional<StageGroups> groups = stage_groups(lowered);
  rank.comms = groups ? std::make_unique<Communicators>(explicit_groups(*groups, *rank.pipeline_reductions),
                                                        identity.rank, identity.world_size, id)
                      : std::make_unique<Communicators>(strategy, lowered.graph, identity.rank, identity.world_size,
                                                        id, other_layouts(lowered));
  const std::size_t part_count = lowered.parts.size();
  rank.layout_comms.resize(part_count);
  for (std::size_t p = 0; p < part_count; ++p)
    if (rank.layout_of[p] == p && !groups && !same_parameter_layout(lowered.parts[p].strategy, strategy))
      rank.layout_comms[p] = std::make_unique<Communicators>(lowered.parts[p].strategy, lowered.graph, identity.rank,
                                                             identity.world_size, *rank.comms);
  if (std::any_of(rank.layout_of.begin(), rank.layout_of.end(), [](std::size_t q) { return q != 0; }))
    rank.comms->make_resharding();
}

// One runtime per part of the step (a hot-switching phase); the uniform plan is one part.
void make_runtimes(RankParts& rank, const Plan& plan, const gpu::RankIdentity& identity,
                   const TrainingOptions& options) {
  const PlanGraphs& lowered = rank.lowered;
  const std::size_t part_count = lowered.parts.size();
  // ZeRO over replicas that shard otherwise: the AdamW state lives in the reductions' parts
  // (executor/gpu/pipeline_reduction_run.hpp).
  const std::optional<ReplicaReduction> replicas = replica_reduction(lowered);
  const bool optimizer_sharded_over_pipelines =
      !rank.pipeline_reductions->empty() && replicas && replicas->optimizer_sharded;
  rank.parameters.resize(part_count);
  cudaStream_t setup = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&setup, cudaStreamNonBlocking));
  for (std::size_t p = 0; p < part_count; ++p)
    rank.parameters[p] = rank.layout_of[p] != p
                             ? rank.parameters[rank.layout_of[p]]
                             : std::make_shared<StageParameters>(
                                   rank.here[p].scenario, plan_parameter_units(rank.here[p], identity.rank, options.seed),
                                   setup, rank.layout_of[p] == rank.layout_of[part_count - 1] &&
                                              !optimizer_sharded_over_pipelines);
  TWIN_CUDA_CHECK(cudaStreamSynchronize(setup));
  TWIN_CUDA_CHECK(cudaStreamDestroy(setup));
  std::int64_t step_micro_batches = 0;
  for (const PlanPart& part : rank.here) step_micro_batches += part.strategy.num_micro_batches;
  for (std::size_t p = 0; p < part_count; ++p) {
    StepPart share;
    share.parameters = rank.parameters[p];
    share.adds_gradients = p > 0;
    // The loss averages over every token of the step: every part's, every replica's.
    share.loss_tokens = lowered.tokens_per_step();
    share.micro_batches = step_micro_batches;
    share.input_first_row = rank.shares[p].inputs.first_row(rank.here[p].scenario.training.seq_length);
    share.first_sequence = rank.shares[p].first_sequence + rank.shares[p].inputs.first;
    share.micro_batch_stride = rank.shares[p].micro_batch_stride;
    share.pipeline_reductions = rank.pipeline_reductions;
    share.optimizer_sharded_over_pipelines = optimizer_sharded_over_pipelines;
    if (part_count > 1) {
      const std::size_t before = p == 0 ? part_count - 1 : p - 1;
      share.switch_from = rank.parameters[before];
      if (rank.layout_of[before] != rank.layout_of[p]) {
        share.switch_blocks = plan_resharding(lowered.parts[before], lowered.parts[p], plan.scenario.cluster, p > 0);
        share.switch_comm = rank.comms->resharding();
      }
    }
    const PlanPart& part = rank.here[p];
    const RankClass& rank_class =
        lowered.graph.classes.at(static_cast<std::size_t>(part.class_of_rank.at(identity.rank)));
    rank.runtimes.push_back(std::make_unique<StageRuntime>(part, lowered.graph, rank_class, identity.rank,
                                                           rank.comms_of(p), options, std::move(share)));
  }
}

// This rank's tokens of part `p` in iteration `iteration`: the sequences its family says it reads.
std::vector<std::int32_t> part_tokens(const RankParts& rank, std::size_t p, int iteration, std::uint64_t seed,
                                      const PackedSteps& packed_steps) {
  const PlanPart& part = rank.here[p];
  const TokenShare& share = rank.shares[p];
  const std::int64_t seq_length = part.scenario.training.seq_length;
  const TokenStream stream{rank.lowered.scenario.model.vocab_size, seq_length, seed};
  auto tokens = part.packs.empty() ? share_tokens(stream, iteration, share)
                                   : packed_steps.rank_tokens(iteration, p, share);
  if (share.context_parallel_size > 1)
    tokens = context_parallel_share(tokens, seq_length, share.inputs.count, share.micro_batches,
                                    share.context_parallel_size, share.context_parallel_rank);
  return tokens;
}

// One run record per part: its class's kernels; the losses and step times are the step's.
std::vector<RankRun> part_runs(const RankParts& rank, int rank_id, const std::string& device) {
  std::vector<RankRun> runs(rank.here.size());
  for (std::size_t p = 0; p < runs.size(); ++p) {
    runs[p].rank = rank_id;
    runs[p].part = static_cast<int>(p);
    runs[p].parts = static_cast<int>(runs.size());
    runs[p].rank_class = rank.runtimes[p]->rank_class().index;
    const RankCoordinates at = coordinates_of(rank.here[p].strategy, rank.here[p].layout_rank(rank_id));
    runs[p].coordinates = {at.tp, at.cp, data_parallel_rank(rank.lowered, rank_id, p), at.pp};
    runs[p].device = device;
  }
  return runs;
}

// What a step needs beside the rank's parts.
struct StepContext {
  const ExecuteRequest& request;
  gpu::CuptiKernelTimer* timer = nullptr;
  Watchdog& watchdog;
  WorldSum& world_sum;
  const PackedSteps& packed_steps;
};

// One training step: every part's iteration in order, the loss over all ranks, logged and recorded in `runs`.
void run_step(RankParts& rank, const StepContext& step, int iteration, std::vector<RankRun>& runs) {
  const ExecuteRequest& request = step.request;
  double loss_sum = 0, aux_loss = 0, learning_rate = 0;
  std::optional<double> grad_norm;
  std::vector<ExpertLoad> loads;
  for (std::size_t p = 0; p < rank.runtimes.size(); ++p) {
    StageRuntime& runtime = *rank.runtimes[p];
    runtime.run_iteration(iteration, part_tokens(rank, p, iteration, request.seed, step.packed_steps),
                          step.timer, step.watchdog);
    loss_sum += runtime.last_loss_sum();
    if (runtime.switches()) runs[p].switch_s.push_back(runtime.last_switch_s());
    aux_loss += runtime.last_aux_loss();
    if (runtime.last_grad_norm()) {
      grad_norm = runtime.last_grad_norm();
      learning_rate = runtime.last_learning_rate();
    }
    loads.insert(loads.end(), runtime.last_expert_loads().begin(), runtime.last_expert_loads().end());
    if (step.timer) {
      std::vector<gpu::KernelRecord> records = step.timer->collect();
      if (iteration >= request.warmup) append_kernels(runs[p], records);
    }
  }
  const double loss = step.world_sum(static_cast<float>(loss_sum)) / static_cast<double>(rank.lowered.tokens_per_step());
  float step_ms = 0;
  TWIN_CUDA_CHECK(cudaEventElapsedTime(&step_ms, rank.runtimes.front()->last_start(), rank.runtimes.back()->last_end()));
  const double seconds = step_ms / 1e3;
  for (RankRun& run : runs) {
    run.losses.push_back(loss);
    run.iteration_s.push_back(seconds);
    run.grad_norms.push_back(grad_norm.value_or(0));
    run.learning_rates.push_back(learning_rate);
  }
  const bool moe = rank.lowered.scenario.model.is_moe();
  if (moe) {
    runs.front().aux_losses.push_back(aux_loss);
    if (iteration >= request.warmup)
      runs.front().expert_loads.insert(runs.front().expert_loads.end(), loads.begin(), loads.end());
  }
  const Throughput t = rank.lowered.throughput(seconds);
  spdlog::info("[execute] step {:>3}/{}  loss {:.4f}  grad norm {:.3f}  lr {:.3g}  iteration {:.1f} ms  {:.0f} "
               "tokens/s  MFU {:.1f}%",
               iteration + 1, request.iterations, loss, grad_norm.value_or(0), learning_rate, 1e3 * seconds,
               t.tokens_per_s, 100 * t.mfu);
  if (moe) {
    double busiest = 0;
    for (const ExpertLoad& load : loads) busiest = std::max(busiest, routing_imbalance(load));
    spdlog::info("[execute]          load-balancing loss {:.4f} (this rank)  busiest expert {:.2f}x the mean",
                 aux_loss, busiest);
  }
}

// Each part's run file, with the rank's peak: each layout's parameters once, every part's own buffers, the
// activation pool's high mark (device-wide) once.
void write_part_runs(const RankParts& rank, std::vector<RankRun>& runs, const ExecuteRequest& request,
                     const gpu::CuptiKernelTimer* timer) {
  std::size_t peak = rank.runtimes.front()->peak_memory_bytes();
  for (std::size_t p = 1; p < runs.size(); ++p)
    peak += rank.runtimes[p]->own_bytes() + (rank.layout_of[p] == p ? rank.parameters[p]->allocated_bytes() : 0);
  for (std::size_t p = 0; p < runs.size(); ++p) {
    runs[p].peak_memory_bytes = peak;
    if (timer) runs[p].dropped_records = timer->dropped_records();
    write_rank_run(request.run_dir, runs[p], rank.runtimes[p]->rank_class(), request.warmup);
  }
}

int rank_main(const ExecuteRequest& request, const gpu::RankIdentity& identity) {
  if (identity.rank != 0) spdlog::set_level(spdlog::level::warn);
  gpu::prepare_nccl_environment(identity);
  TWIN_CUDA_CHECK(cudaSetDevice(identity.local_rank));
  const Plan plan = read_plan(request.plan);
  const PlanGraphs lowered = plan_graphs(plan, request.plan);
  cudaDeviceProp props{};
  TWIN_CUDA_CHECK(cudaGetDeviceProperties(&props, identity.local_rank));
  RankParts rank{lowered, rank_parts(lowered, identity.rank), layout_owners(lowered), {}};
  for (std::size_t p = 0; p < rank.here.size(); ++p) rank.shares.push_back(rank_token_share(lowered, identity.rank, p));
  // A hot-switching plan's home strategy: its layout is every phase's.
  make_communicators(rank, plan.strategy, identity);
  TrainingOptions options;
  options.recipe = with_flags(plan.scenario.training.recipe, request.recipe);
  options.train_iters = request.iterations;
  options.seed = request.seed;
  options.nccl_timeout_s = request.nccl_timeout_s;
  options.attention = request.attention;
  make_runtimes(rank, plan, identity, options);
  std::optional<gpu::CuptiKernelTimer> timer;
  if (request.trace) timer.emplace();
  // Rows that pack sequences (hot switching): a sequence's tokens follow from its length and ordinal in the
  // step, so plans packing the same sequences differently train on the same data.
  std::vector<PackedPart> packed_parts;
  for (const PlanPart& part : lowered.parts) packed_parts.push_back({part.scenario.training.seq_length, part.packs});
  const Scenario& scenario = plan.scenario;
  const PackedSteps packed_steps(TokenStream{scenario.model.vocab_size, scenario.training.seq_length, request.seed},
                                 packed_parts);
  Watchdog watchdog(request.nccl_timeout_s, nccl_watchdog_hooks(*rank.comms, rank.layout_comms));
  WorldSum world_sum(*rank.comms, watchdog, identity.rank);
  std::vector<RankRun> runs = part_runs(rank, identity.rank, props.name);
  spdlog::info("[execute] {} on {} GPU(s) ({}), {} iterations ({} warm-up)", lowered.key, identity.world_size,
               props.name, request.iterations, request.warmup);
  // The clock the node's GPUs hold through the steps, for the fold (the first rank samples its node).
  std::optional<ClockSampler> clocks;
  if (identity.rank == 0) clocks.emplace(request.run_dir);
  try {
    const StepContext step{request, timer ? &*timer : nullptr, watchdog, world_sum, packed_steps};
    for (int iteration = 0; iteration < request.iterations; ++iteration) run_step(rank, step, iteration, runs);
    write_part_runs(rank, runs, request, timer ? &*timer : nullptr);
    world_sum(0);  // every rank has written its part
    if (identity.rank == 0)
      write_run_summary(request.run_dir, plan, lowered, identity.world_size, request.warmup,
                        to_string(request.attention));
  } catch (const std::exception& error) {
    report_and_leave(error);  // an out-of-memory on one rank, say, while its peers wait in a collective
  }
  return 0;
}

int rank_main_or_exit(const ExecuteRequest& request, const gpu::RankIdentity& identity) {
  try {
    return rank_main(request, identity);
  } catch (const std::exception& error) {  // before the iterations: no collective is in flight
    report_and_leave(error);
  }
}

}  // namespace

int execute_main(const ExecuteRequest& request) {
  const Plan plan = read_plan(request.plan);
  ExecuteRequest resolved = request;
  if (resolved.run_dir.empty()) resolved.run_dir = std::filesystem::path(request.plan).parent_path().string();
  if (resolved.run_dir.empty()) resolved.run_dir = ".";
  if (resolved.iterations <= resolved.warmup)
    throw std::invalid_argument(fmt::format("--iters {} must exceed --warmup {}", resolved.iterations, resolved.warmup));
  if (const auto error = recipe_error(with_flags(plan.scenario.training.recipe, request.recipe)))
    throw std::invalid_argument(fmt::format("twin execute: the training recipe of {} with the flags given: {}",
                                            request.plan, *error));
  if (auto identity = gpu::rank_from_environment()) return rank_main_or_exit(resolved, *identity);
  check_executable_plan(plan, request.plan);
  const int world = plan_graphs(plan, request.plan).world_size();
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    spdlog::error("twin execute needs CUDA GPUs, and none was found ({})",
                  status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount reports 0 devices");
    return 1;
  }
  if (count < world) {
    spdlog::error("the plan {} needs {} GPUs; this machine has {} (launch it with mpirun/srun over several nodes)",
                  plan_graphs(plan, request.plan).key, world, count);
    return 1;
  }
  std::filesystem::create_directories(resolved.run_dir);
  if (world == 1) return rank_main_or_exit(resolved, gpu::RankIdentity{0, 1, 0, "twin"});
  return gpu::launch_local_ranks(world);
}

}  // namespace twin::exec
