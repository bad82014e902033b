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
#include "executor/gpu/communicators.hpp"
#include "executor/plan_check.hpp"
#include "executor/run_report.hpp"
#include "executor/gpu/stage_runtime.hpp"
#include "executor/token_stream.hpp"
#include "executor/watchdog.hpp"
#include "reports/best_plan.hpp"
#include "strategies/flops.hpp"
#include "strategies/lowering.hpp"
#include "traces/measured_ops.hpp"

namespace twin::exec {
namespace {

using nlohmann::json;

// The watchdog's view of this rank's NCCL communicators.
WatchdogHooks nccl_watchdog_hooks(Communicators& comms) {
  return {[&comms] { return comms.async_error(); }, [&comms] { comms.abort_all(); }};
}

// CUPTI's kernel records as the run files keep them (memcpys are not ops).
void append_kernels(RankRun& run, const std::vector<gpu::KernelRecord>& records) {
  for (const gpu::KernelRecord& r : records) {
    if (r.is_memcpy) continue;
    run.kernels.push_back(measured_kernel(r.name, r.start_ns, r.end_ns, r.stream_id, r.region));
  }
}

int rank_main(const ExecuteRequest& request, const gpu::RankIdentity& identity) {
  if (identity.rank != 0) spdlog::set_level(spdlog::level::warn);
  gpu::prepare_nccl_environment(identity);
  TWIN_CUDA_CHECK(cudaSetDevice(identity.local_rank));
  const Plan plan = read_plan(request.plan);
  const Scenario& scenario = plan.scenario;
  const Strategy& strategy = plan.strategy;
  const IterationGraph graph = lower_to_op_graphs(scenario, strategy);
  cudaDeviceProp props{};
  TWIN_CUDA_CHECK(cudaGetDeviceProperties(&props, identity.local_rank));

  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));  // with NCCL_COMM_ID set, every rank derives the same id
  const RankCoordinates me = coordinates_of(strategy, identity.rank);
  Communicators comms(strategy, graph, identity.rank, identity.world_size, id);
  TrainingOptions options;
  options.learning_rate = request.learning_rate;
  options.seed = request.seed;
  options.nccl_timeout_s = request.nccl_timeout_s;
  options.attention = request.attention;
  StageRuntime runtime(scenario, strategy, graph, identity.rank, me, comms, options);
  std::optional<gpu::CuptiKernelTimer> timer;
  if (request.trace) timer.emplace();

  const TokenStream stream{scenario.model.vocab_size, scenario.training.seq_length, request.seed};
  const double global_tokens =
      static_cast<double>(scenario.training.global_batch_size) * static_cast<double>(scenario.training.seq_length);
  float* loss_device = nullptr;
  cudaStream_t side = nullptr;
  TWIN_CUDA_CHECK(cudaMalloc(&loss_device, sizeof(float)));
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  cudaEvent_t summed = nullptr;
  TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&summed, cudaEventDisableTiming));
  Watchdog watchdog(request.nccl_timeout_s, nccl_watchdog_hooks(comms));
  const auto world_sum = [&](float value) {
    watchdog.arm(fmt::format("rank {}", identity.rank), [] { return std::string("the loss all-reduce over all ranks"); });
    TWIN_CUDA_CHECK(cudaMemcpyAsync(loss_device, &value, sizeof(float), cudaMemcpyHostToDevice, side));
    TWIN_NCCL_CHECK(ncclAllReduce(loss_device, loss_device, 1, ncclFloat32, ncclSum, comms.world(), side));
    TWIN_CUDA_CHECK(cudaMemcpyAsync(&value, loss_device, sizeof(float), cudaMemcpyDeviceToHost, side));
    TWIN_CUDA_CHECK(cudaEventRecord(summed, side));
    TWIN_CUDA_CHECK(cudaEventSynchronize(summed));
    watchdog.disarm();
    return value;
  };

  RankRun run;
  run.rank = identity.rank;
  run.rank_class = runtime.rank_class().index;
  run.coordinates = {me.tp, me.cp, me.dp, me.pp};
  run.device = props.name;
  spdlog::info("[execute] {} on {} GPU(s) ({}), {} iterations ({} warm-up)", strategy.key(), identity.world_size,
               props.name, request.iterations, request.warmup);
  for (int iteration = 0; iteration < request.iterations; ++iteration) {
    const auto tokens = rank_iteration_tokens(stream, iteration, scenario.training.global_batch_size,
                                              strategy.data_parallel_size, me.dp, strategy.micro_batch_size,
                                              strategy.num_micro_batches);
    runtime.run_iteration(iteration, tokens, timer ? &*timer : nullptr, watchdog);
    const double loss = world_sum(static_cast<float>(runtime.last_loss_sum())) / global_tokens;
    const double seconds = runtime.last_iteration_ms() / 1e3;
    run.losses.push_back(loss);
    run.iteration_s.push_back(seconds);
    if (scenario.model.is_moe()) {
      run.aux_losses.push_back(runtime.last_aux_loss());
      if (iteration >= request.warmup)
        for (const ExpertLoad& load : runtime.last_expert_loads()) run.expert_loads.push_back(load);
    }
    if (timer) {
      std::vector<gpu::KernelRecord> records = timer->collect();
      if (iteration >= request.warmup) append_kernels(run, records);
    }
    const Throughput t = throughput(scenario, strategy, seconds);
    spdlog::info("[execute] step {:>3}/{}  loss {:.4f}  iteration {:.1f} ms  {:.0f} tokens/s  MFU {:.1f}%",
                 iteration + 1, request.iterations, loss, 1e3 * seconds, t.tokens_per_s, 100 * t.mfu);
    if (scenario.model.is_moe()) {
      double busiest = 0;
      for (const ExpertLoad& load : runtime.last_expert_loads()) busiest = std::max(busiest, routing_imbalance(load));
      spdlog::info("[execute]          load-balancing loss {:.4f} (this rank)  busiest expert {:.2f}x the mean",
                   runtime.last_aux_loss(), busiest);
    }
  }
  run.peak_memory_bytes = runtime.peak_memory_bytes();
  if (timer) run.dropped_records = timer->dropped_records();
  write_rank_run(request.run_dir, run, runtime.rank_class(), request.warmup);
  world_sum(0);  // every rank has written its part
  if (identity.rank == 0)
    write_run_summary(request.run_dir, plan, graph, identity.world_size, request.warmup,
                      to_string(request.attention));
  TWIN_CUDA_CHECK(cudaEventDestroy(summed));
  TWIN_CUDA_CHECK(cudaFree(loss_device));
  TWIN_CUDA_CHECK(cudaStreamDestroy(side));
  return 0;
}

// A failed rank reports and leaves at once: destructors would wait on GPU work that may never finish
// (a hung collective), and the launcher stops the other ranks when one exits non-zero.
int rank_main_or_exit(const ExecuteRequest& request, const gpu::RankIdentity& identity) {
  try {
    return rank_main(request, identity);
  } catch (const std::exception& error) {
    spdlog::error("{}", error.what());
    spdlog::default_logger()->flush();
    std::fflush(nullptr);
    std::_Exit(1);
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
  if (auto identity = gpu::rank_from_environment()) return rank_main_or_exit(resolved, *identity);
  check_executable_plan(plan, request.plan);
  const int world = plan.strategy.world_size();
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    spdlog::error("twin execute needs CUDA GPUs, and none was found ({})",
                  status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount reports 0 devices");
    return 1;
  }
  if (count < world) {
    spdlog::error("the plan {} needs {} GPUs; this machine has {} (launch it with mpirun/srun over several nodes)",
                  plan.strategy.key(), world, count);
    return 1;
  }
  std::filesystem::create_directories(resolved.run_dir);
  if (world == 1) return rank_main_or_exit(resolved, gpu::RankIdentity{0, 1, 0, "twin"});
  return gpu::launch_local_ranks(world);
}

}  // namespace twin::exec
