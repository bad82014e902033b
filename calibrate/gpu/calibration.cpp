// The rank program. NCCL work comes first, while every rank is alive; then every rank times its share of the
// GEMM grid at once (one GPU each, no NCCL traffic beside them) and rank 0 merges the timings, times the other
// kernels and writes the profile.
#include "calibrate/gpu/calibration.hpp"

#include <chrono>
#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "calibrate/calibration_base.hpp"
#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_partial.hpp"
#include "calibrate/gpu/calibration_machine.hpp"
#include "calibrate/gpu/calibration_profile.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "calibrate/gpu/gemm_ranks.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"
#include "calibrate/gpu/profile_check.hpp"
#include "calibrate/gpu/profile_increment.hpp"
#include "calibrate/gpu/sustained_clock.hpp"
#include "cost/collective_tables.hpp"
#include "cost/profile.hpp"
#include "gpu/checks.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/launcher.hpp"

namespace twin::gpu {
namespace {

using nlohmann::json;

// The grid, plus the scenario's exact shapes.
std::vector<GemmShape> calibration_gemm_shapes(const CalibrationRequest& request, const GpuSpec& spec,
                                               const std::function<void(const std::string&)>& progress) {
  const GemmGrid grid = default_gemm_grid(request.quick, spec);
  std::vector<GemmShape> shapes = grid.shapes;
  if (spec.peak_fp8_tflops > 0 && !request.quick) {
    const std::vector<GemmShape> fp8 = fp8_gemm_grid();
    progress(fmt::format("FP8 GEMM grid: {} shapes", fp8.size()));
    shapes.insert(shapes.end(), fp8.begin(), fp8.end());
  }
  progress(fmt::format("GEMM grid: {} shapes ({} half-octave shapes estimated over {:.0f} ms left out), about {:.0f} s "
                       "of GPU kernel time estimated from the built-in profile",
                       grid.shapes.size(), grid.left_out_slow, kGemmGridMaxKernelNs * 1e-6,
                       estimated_gemm_calibration_seconds(grid.shapes, spec, request.quick)));
  if (!request.scenario.empty()) {
    const std::vector<GemmShape> needed = scenario_gemm_shapes(request.scenario);
    progress(fmt::format("scenario {}: {} distinct GEMM shapes, about {:.0f} s of GPU kernel time", request.scenario,
                         needed.size(), estimated_gemm_calibration_seconds(needed, spec, request.quick)));
    shapes.insert(shapes.end(), needed.begin(), needed.end());
  }
  return distinct_gemm_shapes(shapes);
}

// Waits until every rank is here (rank 0 has written the profile), so that no rank drops its partial file before.
// The kernel profile of `spec` in `profile`, to write into (Profile::kernels_for reads).
GpuKernelProfile& kernels_of(Profile& profile, const GpuSpec& spec) {
  return profile.gpus[static_cast<std::size_t>(&profile.kernels_for(spec) - profile.gpus.data())];
}

void barrier(ncclComm_t world) {
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  DeviceBuffer one(sizeof(float));
  TWIN_NCCL_CHECK(ncclAllReduce(one.data(), one.data(), 1, ncclFloat32, ncclSum, world, stream));
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
}

// The two sustained-clock curves, one under BF16 GEMMs and one under FP8 GEMMs (cost/sustained_clock.hpp), measured
// alike on every rank: the BF16 curve first, whose heating the FP8 load then starts from.
// With --power-model, the power model is fitted on the BF16 load's readings and the loads after it (cost/power_model.hpp).
struct SustainedClocks {
  SustainedClockCurve bf16, fp8;
  PowerModel power;
};

void set_sustained_clocks(GpuKernelProfile& kernels, const SustainedClocks& clocks) {
  kernels.sustained_clock = clocks.bf16;
  kernels.sustained_clock_fp8 = clocks.fp8;
  // Measured only with --power-model: without it, a profile's own model (--sustained-clock) stays as it was.
  if (clocks.power.present()) kernels.power_model = clocks.power;
}

// The FP8 curve's heating: the BF16 curve's ~14 s at the power cap came just before (each point settles on its own).
constexpr double kFp8HeatAfterBf16Seconds = 0.5;

// Where a calibration's wall time went, phase by phase ("clock loads 38.2 s, GEMMs 39.0 s, ...").
class PhaseTimes {
 public:
  using Clock = std::chrono::steady_clock;
  explicit PhaseTimes(Clock::time_point started) : last_(started) {}
  void end(const std::string& phase) {
    const Clock::time_point now = Clock::now();
    text_ += fmt::format("{}{} {:.1f} s", text_.empty() ? "" : ", ", phase, std::chrono::duration<double>(now - last_).count());
    last_ = now;
  }
  const std::string& text() const { return text_; }

 private:
  Clock::time_point last_;
  std::string text_;
};

// Rank 0's part once the GEMMs are merged: the other kernels timed, the profile assembled and written.
void write_profile(CalibrationRun& run, const std::optional<ProfileIncrement>& increment,
                   const SustainedClocks& clocks, std::chrono::steady_clock::time_point started, PhaseTimes& phases,
                   const std::function<void(const std::string&)>& progress) {
  const CalibrationRequest& request = run.request;
  const GemmCalibration& gemms = run.gemms;
  const auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  Profile profile;
  if (increment) {
    profile = profile_with_scenario_shapes(*increment, run, progress);
  } else {
    GpuKernelProfile kernels = calibration_base(run.spec, run.preset_name);
    kernels.gemm = gemms.efficiency;
    kernels.reference_sm_clock_MHz = gemms.reference_sm_clock_MHz;
    // Attention's timings join the GEMMs' clock (each probed, then scaled); a profile being added to keeps its own rule.
    kernels.attention_at_reference_clock = gemms.reference_sm_clock_MHz > 0;
    set_sustained_clocks(kernels, clocks);
    for (const auto& [shape, m] : gemms.measured) kernels.measured[gemm_key(shape)] = m;
    index_measured_shapes(kernels);
    const json kernel_summary = calibrate_kernels_into(kernels, request.scenario, run.spec, request.quick, progress);
    phases.end("other kernels");
    run.seconds = seconds();
    profile = calibrated_profile(run, kernels, kernel_summary);
  }
  save_profile(profile, request.out);
  phases.end("the profile written");
  progress(fmt::format("wrote {} ({} GEMM shapes timed, {} collective tables) in {:.1f} s: {}", request.out,
                       gemms.measured.size(), run.facts.tables.size(), seconds(), phases.text()));
  if (!gemms.gpu_agreement.is_null())
    progress(fmt::format("GPUs agree on {} shapes timed by each: spread at most {:.1f}% at one clock, {:.1f}% as "
                         "timed; each GPU's time over the median: {}", gemms.gpu_agreement["shapes"].size(),
                         100 * gemms.gpu_agreement["max_spread_at_reference_clock"].get<double>(),
                         100 * gemms.gpu_agreement["max_spread_as_timed"].get<double>(),
                         gemms.gpu_agreement["gpu_time_over_median"].dump()));
}

SustainedClocks measure_sustained_clocks(const CalibrationRequest& request, const RankIdentity& identity,
                                         ncclComm_t world, const std::function<void(const std::string&)>& progress) {
  SustainedClockLoad load = request.quick ? SustainedClockLoad::quick() : SustainedClockLoad{};
  if (!request.power_model) load.power_load_s = 0;
  SustainedClocks clocks;
  const SustainedClockMeasurement bf16 =
      measure_sustained_clock_on_ranks(world, identity.rank, identity.world_size, load, progress);
  clocks.bf16 = bf16.curve;
  clocks.power = bf16.power;
  load.gemm_inputs = GemmInputs::fp8_per_tensor;
  load.power_load_s = 0;  // the power model reads the BF16 load's
  if (!request.quick) load.heat_s = kFp8HeatAfterBf16Seconds;  // the BF16 curve has just run at the cap
  clocks.fp8 = measure_sustained_clock_on_ranks(world, identity.rank, identity.world_size, load, progress).curve;
  return clocks;
}

// --sustained-clock: the curves measured on every rank, written by rank 0 into the profile's section of this GPU.
void add_sustained_clock(const CalibrationRequest& request, const RankIdentity& identity, ncclComm_t world,
                         const GpuSpec& spec, const std::function<void(const std::string&)>& progress) {
  const SustainedClocks clocks = measure_sustained_clocks(request, identity, world, progress);
  if (identity.rank != 0) return;
  Profile profile = load_profile(request.profile);
  GpuKernelProfile& kernels = kernels_of(profile, spec);
  const bool had_power_model = kernels.power_model.present();
  set_sustained_clocks(kernels, clocks);
  save_profile(profile, request.out);
  progress(fmt::format("wrote {}: the sustained-clock curves of {} (BF16 GEMMs {} points, FP8 GEMMs {}), {}", request.out,
                       spec.name, clocks.bf16.points.size(), clocks.fp8.points.size(),
                       clocks.power.present() ? "the power model"
                       : had_power_model      ? "its power model as it was (measured with --power-model)"
                                              : "no power model (measured with --power-model)"));
}

// --collectives: the tables measured on every rank; rank 0 adds those the profile lacks (same GPU, collective,
// placement and blocks per peer), the interference pairs (in provenance) and the host's grouped GEMM issue time where
// it has none, and writes it. What the profile holds stays as it was: its predictions too.
void add_collective_tables(const CalibrationRequest& request, const RankIdentity& identity, ncclComm_t world,
                           const cudaDeviceProp& props, const GpuSpec& spec, const std::string& preset_name,
                           const std::function<void(const std::string&)>& progress) {
  const MachineFacts facts = measure_machine(world, identity, props, spec, request, true, progress);
  if (identity.rank != 0) return;
  Profile profile = load_profile(request.profile);
  int added = 0;
  for (CollectiveTable table : facts.tables) {
    table.gpu = preset_name;
    if (find_collective_table(profile.collectives, table.gpu, table.collective, table.group_size,
                              table.ranks_per_node, table.nodes, table.blocks_per_peer))
      continue;
    profile.collectives.push_back(std::move(table));
    ++added;
  }
  GpuKernelProfile& kernels = kernels_of(profile, spec);
  const bool issue_added = kernels.grouped_gemm_issue_ns == 0 && facts.grouped_gemm_issue_ns > 0;
  if (issue_added) kernels.grouped_gemm_issue_ns = facts.grouped_gemm_issue_ns;
  // The pairs are recorded, not priced: on the studies of 2026-11-30 they predicted worse than the scalar pair
  // (docs/ACCURACY.md, "Interference measured pair by pair"); a profile may still state overlap.points.
  const bool points_added = !profile.provenance.contains("interference_points") && !facts.interference_points.empty();
  if (points_added) profile.provenance["interference_points"] = interference_timings_json(facts.interference_points);
  profile.provenance["collectives_added"].push_back({{"date", utc_now()}, {"tables", added},
                                                     {"interference_points", points_added ? facts.interference_points.size() : 0},
                                                     {"grouped_gemm_issue_ns", issue_added ? facts.grouped_gemm_issue_ns : 0},
                                                     {"ranks", identity.world_size}, {"versions", versions()}});
  save_profile(profile, request.out);
  progress(fmt::format("wrote {}: {} of {} collective tables measured were missing and added{}{}", request.out, added,
                       facts.tables.size(), points_added ? ", and the interference pairs (provenance)" : "",
                       issue_added ? ", and the host's grouped GEMM issue time" : ""));
}

int run_rank(const CalibrationRequest& request, const RankIdentity& identity) {
  const auto started = std::chrono::steady_clock::now();
  if (identity.rank != 0 || request.quiet) spdlog::set_level(spdlog::level::warn);
  auto progress = [&](const std::string& line) { spdlog::info("[calibrate] {}", line); };
  prepare_nccl_environment(identity);
  TWIN_CUDA_CHECK(cudaSetDevice(identity.local_rank));
  cudaDeviceProp props{};
  TWIN_CUDA_CHECK(cudaGetDeviceProperties(&props, identity.local_rank));
  const std::string preset_name = preset_for_device(props);
  const std::optional<GpuSpec> spec = gpu_preset(preset_name);
  if (!spec) throw std::runtime_error("GPU preset " + preset_name + " is missing from core/cluster.cpp");
  progress(fmt::format("{} ranks ({}), {} = preset {}", identity.world_size, identity.launcher, props.name, preset_name));
  // --profile: only the scenario's shapes the profile lacks (every rank reads it, to know the same list).
  std::optional<ProfileIncrement> increment;
  if (!request.profile.empty() && !request.sustained_clock_only && !request.collectives_only)
    increment = profile_increment(request.profile, request.scenario, preset_name);

  ncclComm_t world = nullptr;
  ncclUniqueId id{};
  TWIN_NCCL_CHECK(ncclGetUniqueId(&id));  // with NCCL_COMM_ID set, every rank derives the same id
  TWIN_NCCL_CHECK(ncclCommInitRank(&world, identity.world_size, id, identity.rank));
  if (request.sustained_clock_only) {
    add_sustained_clock(request, identity, world, *spec, progress);
    barrier(world);
    TWIN_NCCL_CHECK(ncclCommDestroy(world));
    return 0;
  }
  if (request.collectives_only) {
    add_collective_tables(request, identity, world, props, *spec, preset_name, progress);
    barrier(world);
    TWIN_NCCL_CHECK(ncclCommDestroy(world));
    return 0;
  }

  GemmRanksRequest gemm_request;
  gemm_request.shapes = increment ? increment->gemms : calibration_gemm_shapes(request, *spec, progress);
  gemm_request.gpu = *spec;
  gemm_request.quick = request.quick;
  gemm_request.quiet = request.quiet;
  if (increment) {
    gemm_request.reference_sm_clock_MHz = increment->reference_sm_clock_MHz;
    gemm_request.min_measured = 0;
  }
  gemm_request.world = world;
  gemm_request.rank = identity.rank;
  gemm_request.world_size = identity.world_size;
  gemm_request.partial = gemm_partial_path(request.out, identity.rank);
  gemm_request.arguments = {{"quick", request.quick}, {"scenario", request.scenario}, {"profile", request.profile}};
  gemm_request.gpu_uuid = device_uuid(identity.local_rank);
  const GemmRankPlan plan = plan_gemm_rank(gemm_request);  // a partial file of another calibration fails here
  PhaseTimes phases(started);
  phases.end("start");
  const MachineFacts facts = measure_machine(world, identity, props, *spec, request, !increment, progress);
  phases.end("collectives and host");
  // Before the GEMM grid, which it would otherwise follow cold: a shapes increment measures no clock.
  SustainedClocks clocks;
  if (!increment) {
    clocks = measure_sustained_clocks(request, identity, world, progress);
    gemm_request.heat_s = kHeatAfterLoadSeconds;  // the GPU comes from its power cap
    phases.end("clock loads");
  }
  const GemmCalibration gemms = calibrate_gemms_on_ranks(gemm_request, plan);
  phases.end("GEMMs");

  if (identity.rank == 0) {
    CalibrationRun run{request, identity, props, preset_name, *spec, facts, gemms, 0};
    write_profile(run, increment, clocks, started, phases, progress);
  }
  barrier(world);
  std::error_code ignored;
  std::filesystem::remove(gemm_request.partial, ignored);  // the profile holds it all now
  TWIN_NCCL_CHECK(ncclCommDestroy(world));
  return 0;
}

// The program of one rank: calibration, or the check of a profile.
int rank_main(const CalibrationRequest& request, const RankIdentity& identity) {
  if (!request.check_profile.empty())
    return check_profile_rank(request.check_profile, request.check_gemms, request.check_out,
                              request.max_message_bytes, identity);
  return run_rank(request, identity);
}

}  // namespace

int calibrate_main(const CalibrationRequest& request) {
  if (auto identity = rank_from_environment()) return rank_main(request, *identity);
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    spdlog::error("twin calibrate needs a CUDA GPU, and none was found ({}). Run it on a GPU machine, or simulate "
                  "with a built-in profile: twin simulate SCENARIO.json --profile builtin",
                  status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount reports 0 devices");
    return 1;
  }
  if (request.gpus > count) {
    spdlog::error("--gpus {} asks for more GPUs than the {} present", request.gpus, count);
    return 2;
  }
  const int gpus = request.gpus > 0 ? request.gpus : count;
  spdlog::info("[calibrate] {} GPU(s): one process each{}", gpus, request.quick ? " (quick)" : "");
  if (gpus == 1) return rank_main(request, RankIdentity{0, 1, 0, "twin"});
  return launch_local_ranks(gpus);
}

}  // namespace twin::gpu
