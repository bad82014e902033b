// Every rank knows every rank's share (the split is a function of the shapes and the rank count), so only the
// values travel: five doubles per (shape, round), NaN where nothing was timed, padded to the largest share.
#include "calibrate/gpu/gemm_ranks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "calibrate/calibration_progress.hpp"
#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_partial.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "gpu/checks.hpp"

namespace twin::gpu {
namespace {

constexpr std::size_t kValuesPerTiming = 5;
constexpr double kPartialSaveSeconds = 2.0;

std::vector<GemmShape> pick(const std::vector<GemmShape>& shapes, const std::vector<std::size_t>& indices) {
  std::vector<GemmShape> out;
  for (std::size_t i : indices) out.push_back(shapes[i]);
  return out;
}

// The rank's timings as [share position][round][value], NaN where none.
std::vector<double> pack(const std::vector<std::vector<GemmTiming>>& timed, int rounds, std::size_t padded_shapes) {
  std::vector<double> out(padded_shapes * rounds * kValuesPerTiming, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t j = 0; j < timed.size(); ++j)
    for (std::size_t r = 0; r < timed[j].size() && r < static_cast<std::size_t>(rounds); ++r) {
      const Measurement& m = timed[j][r].measured;
      double* at = &out[(j * rounds + r) * kValuesPerTiming];
      at[0] = m.median_ns, at[1] = m.p10_ns, at[2] = m.p90_ns, at[3] = m.samples, at[4] = m.sm_clock_MHz;
    }
  return out;
}

void unpack(const double* values, const std::vector<std::size_t>& share, int rounds, std::size_t gpu,
            std::vector<GemmShapeTimings>& timings) {
  for (std::size_t j = 0; j < share.size(); ++j) {
    auto& rounds_of = timings[share[j]].rounds;
    rounds_of.resize(std::max(rounds_of.size(), gpu + 1));
    for (int r = 0; r < rounds; ++r) {
      const double* at = &values[(j * rounds + r) * kValuesPerTiming];
      if (std::isnan(at[0])) continue;
      Measurement m;
      m.median_ns = at[0], m.p10_ns = at[1], m.p90_ns = at[2], m.samples = static_cast<int>(at[3]), m.sm_clock_MHz = at[4];
      rounds_of[gpu].push_back(m);
    }
  }
}

// Every rank must hold the same list: a rank on another kind of GPU would have built another grid.
void check_same_shapes(const GemmRanksRequest& request) {
  const std::uint64_t mine = gemm_shapes_hash(request.shapes);
  const auto all = all_gather_values(request.world, request.world_size, mine);
  for (int r = 1; r < request.world_size; ++r)
    if (all[r] != all[0])
      throw std::runtime_error(fmt::format("rank {} would time other GEMM shapes than rank 0 (another GPU kind or "
                                           "scenario?): every rank of a calibration needs the same list", r));
}

}  // namespace

std::string device_uuid(int device) {
  cudaDeviceProp props{};
  TWIN_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  std::string hex;
  for (const char byte : props.uuid.bytes) hex += fmt::format("{:02x}", static_cast<unsigned char>(byte));
  return hex;
}

GemmRankPlan plan_gemm_rank(const GemmRanksRequest& request) {
  const GemmRuns runs = gemm_runs(request.quick);
  std::vector<double> cost_ns;  // one round of a shape: warm-up and timed launches
  for (const GemmShape& shape : request.shapes)
    cost_ns.push_back((runs.warmup + runs.timed) * estimated_gemm_kernel_ns(shape, request.gpu));
  if (request.world_size > 1) check_same_shapes(request);
  GemmRankPlan plan;
  plan.shares = gemm_rank_shares(request.shapes, cost_ns, request.world_size);
  plan.mine = pick(request.shapes, plan.shares[request.rank]);
  for (std::size_t i : plan.shares[request.rank]) plan.cost_ns.push_back(cost_ns[i]);
  plan.identity = gemm_partial_identity(request.arguments, request.gpu_uuid, request.rank, request.world_size, plan.mine);
  plan.done = load_gemm_partial(request.partial, plan.identity, plan.mine);
  return plan;
}

GemmCalibration calibrate_gemms_on_ranks(const GemmRanksRequest& request, const GemmRankPlan& plan) {
  const GemmRuns runs = gemm_runs(request.quick);
  const std::vector<GemmShape>& mine = plan.mine;
  const nlohmann::json& identity = plan.identity;
  const auto& shares = plan.shares;
  GemmRoundsOptions options;
  options.quick = request.quick;
  options.heat_s = request.heat_s;
  options.seed = 20261121;
  options.cost_ns = plan.cost_ns;
  options.done = plan.done;
  double total_ns = 0, done_ns = 0;
  for (double c : options.cost_ns) total_ns += c * runs.rounds;
  for (const auto& [at, m] : options.done) done_ns += options.cost_ns[at.first];
  if (!options.done.empty())
    spdlog::info("[calibrate] rank {}: continuing {}: {} of {} GEMM timings kept", request.rank,
                 request.partial.string(), options.done.size(), mine.size() * runs.rounds);
  spdlog::info("[calibrate] rank {}: {} GEMM shapes x {} rounds, about {:.0f} s of kernel time", request.rank,
               mine.size(), runs.rounds, total_ns * 1e-9);
  {
    CalibrationProgress progress("GEMMs", "timings", total_ns, static_cast<long long>(mine.size()) * runs.rounds,
                                 request.quiet || request.rank != 0);
    progress.advance(done_ns, static_cast<long long>(options.done.size()));
    // Saved at most every kPartialSaveSeconds (a save of thousands of timings is tens of ms the GPU waits for).
    auto saved = std::chrono::steady_clock::now();
    options.on_batch = [&](const GemmPartialTimings& timings, double batch_ns, std::size_t batch_timings, bool last) {
      const auto now = std::chrono::steady_clock::now();
      if (last || std::chrono::duration<double>(now - saved).count() >= kPartialSaveSeconds) {
        save_gemm_partial(request.partial, identity, mine, timings);
        saved = now;
      }
      progress.advance(batch_ns, static_cast<long long>(batch_timings));
    };
    options.on_heated = [&] { progress.restart_clock(); };
    // Nothing to time (shapes added to a profile that holds them all): no heating either.
    const auto timed = mine.empty() ? std::vector<std::vector<GemmTiming>>() : time_gemm_rounds(mine, options);
    std::size_t padded = 0;
    for (const auto& s : shares) padded = std::max(padded, s.size());
    const std::vector<double> packed = pack(timed, runs.rounds, padded);
    std::vector<double> all = packed;
    if (request.world_size > 1 && !packed.empty())
      all = all_gather_values(request.world, request.world_size, packed.data(), packed.size());
    if (request.rank != 0) return {};
    std::vector<GemmShapeTimings> timings(request.shapes.size());
    for (int g = 0; g < request.world_size && !packed.empty(); ++g)
      unpack(&all[g * packed.size()], shares[g], runs.rounds, static_cast<std::size_t>(g), timings);
    return merge_gemm_timings(request.shapes, timings, request.gpu.peak_bf16_tflops, request.reference_sm_clock_MHz,
                              request.min_measured);
  }
}

}  // namespace twin::gpu
