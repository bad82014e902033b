// Timed by calibration's own protocol (time_gemm_rounds, not quick); a shape's time is the median of its
// rounds, each scaled from the SM clock it ran at to the profile's reference clock as calibration scales
// its own. Shapes are keyed by their profile key in ordered maps so that the order of the rounds depends
// only on the inputs.
#include "calibrate/gpu/gemm_check.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cost/gemm_predictor.hpp"
#include "cost/sm_clock.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "core/atomic_file.hpp"

namespace twin::gpu {
namespace {

struct TimedShape {
  GemmShape shape;
  bool checked = false;        // a shape under check (else a neighbour of one)
  double profile_ns = 0;       // neighbours: the profile's measured time
  std::vector<GemmTiming> rounds;
};

std::string shape_text(const GemmShape& g) {
  return fmt::format("m={} n={} k={} ta={} tb={}", g.m, g.n, g.k, int(g.transpose_a), int(g.transpose_b));
}

double median_of(std::vector<double> values) { return percentile(std::move(values), 0.5); }

// Each round's time at the profile's reference clock (as measured where the profile has none).
std::vector<double> at_reference_clock(const TimedShape& timed, double reference_MHz) {
  std::vector<double> times;
  for (const GemmTiming& round : timed.rounds)
    times.push_back(time_at_sm_clock_ns(round.measured.median_ns, round.measured.sm_clock_MHz, reference_MHz));
  return times;
}

// Each round's time, or its clock, as timed.
std::vector<double> as_timed(const TimedShape& timed, double Measurement::*field) {
  std::vector<double> values;
  for (const GemmTiming& round : timed.rounds) values.push_back(round.measured.*field);
  return values;
}

Op gemm_op(const GemmShape& shape) {
  Op op;
  op.kind = OpKind::gemm;
  op.gemm = shape;
  return op;
}

void time_in_rounds(std::map<std::string, TimedShape>& shapes) {
  std::vector<GemmShape> order;
  for (const auto& [key, timed] : shapes) order.push_back(timed.shape);
  GemmRoundsOptions options;
  options.seed = 20261123;
  auto timings = time_gemm_rounds(order, options);
  std::size_t i = 0;
  for (auto& [key, timed] : shapes) timed.rounds = std::move(timings[i++]);
  spdlog::info("[check] {} GEMM shapes timed in {} rounds", shapes.size(), gemm_runs(false).rounds);
}

std::string rounds_csv(const std::map<std::string, TimedShape>& shapes) {
  const int rounds = gemm_runs(false).rounds;
  std::string out = "shape,role,profile_us";
  for (int round = 1; round <= rounds; ++round) out += fmt::format(",round{}_us", round);
  for (int round = 1; round <= rounds; ++round) out += fmt::format(",round{}_MHz", round);
  out += ",kernel\n";
  for (const auto& [key, timed] : shapes) {
    out += fmt::format("{},{},{:.3f}", shape_text(timed.shape), timed.checked ? "checked" : "neighbour",
                       timed.profile_ns * 1e-3);
    const int timed_rounds = static_cast<int>(timed.rounds.size());
    for (int round = 0; round < rounds; ++round)
      out += round < timed_rounds ? fmt::format(",{:.3f}", timed.rounds[round].measured.median_ns * 1e-3) : ",";
    for (int round = 0; round < rounds; ++round)
      out += round < timed_rounds ? fmt::format(",{:.0f}", timed.rounds[round].measured.sm_clock_MHz) : ",";
    out += fmt::format(",\"{}\"\n", timed_rounds > 0 ? timed.rounds.back().kernel : "");
  }
  return out;
}

}  // namespace

std::vector<CheckRow> check_gemms(const Profile& profile, const GpuSpec& gpu, const std::vector<ModelGemm>& gemms,
                                  const std::string& out_dir) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  std::vector<ModelGemm> checked;
  std::map<std::string, TimedShape> shapes;
  std::vector<std::vector<std::size_t>> neighbours;
  for (const ModelGemm& gemm : gemms) {
    const std::string key = gemm_key(gemm.shape);
    if (kernels.measured.count(key)) {
      spdlog::warn("[check] {} ({}) was measured by calibration: not an independent check, skipped", key, gemm.origin);
      continue;
    }
    checked.push_back(gemm);
    shapes[key] = TimedShape{gemm.shape, true, 0, {}};
    neighbours.push_back(nearest_measured_gemms(kernels.measured_gemms, gemm.shape, kGemmNeighbours));
    for (std::size_t i : neighbours.back()) {
      const MeasuredGemm& neighbour = kernels.measured_gemms[i];
      shapes.try_emplace(gemm_key(neighbour.shape), TimedShape{neighbour.shape, false, neighbour.time_ns, {}});
    }
  }
  spdlog::info("[check] {} GEMM shapes and {} measured neighbours, {} rounds", checked.size(),
               shapes.size() - checked.size(), gemm_runs(false).rounds);
  time_in_rounds(shapes);
  std::filesystem::create_directories(out_dir);
  write_file_atomically(std::filesystem::path(out_dir) / "gemm_rounds.csv", rounds_csv(shapes));

  const double reference_MHz = kernels.reference_sm_clock_MHz;
  if (reference_MHz > 0)
    spdlog::info("[check] times scaled to the profile's reference SM clock, {:.0f} MHz", reference_MHz);
  else
    spdlog::warn("[check] the profile records no reference SM clock: times compared as measured");
  std::vector<double> drift;  // neighbours: now / at calibration
  for (const auto& [key, timed] : shapes)
    if (!timed.checked && !timed.rounds.empty())
      drift.push_back(median_of(at_reference_clock(timed, reference_MHz)) / timed.profile_ns);
  if (!drift.empty())
    spdlog::info("[check] re-timed neighbours run {:+.1f}% (median) against the profile", 100 * (median_of(drift) - 1));

  std::vector<CheckRow> rows;
  for (std::size_t c = 0; c < checked.size(); ++c) {
    const ModelGemm& gemm = checked[c];
    const TimedShape& timed = shapes.at(gemm_key(gemm.shape));
    if (timed.rounds.empty()) {
      spdlog::warn("[check] {} ({}) does not fit in memory, skipped", shape_text(gemm.shape), gemm.origin);
      continue;
    }
    const Op op = gemm_op(gemm.shape);
    // The neighbours' times now, in a copy of the profile: how the prediction moves with them.
    GpuKernelProfile now = kernels;
    for (std::size_t i : neighbours[c])
      if (const TimedShape& n = shapes.at(gemm_key(now.measured_gemms[i].shape)); !n.rounds.empty())
        now.measured_gemms[i].time_ns = median_of(at_reference_clock(n, reference_MHz));
    const double neighbours_move = benchmark_kernel_time_ns(now, gpu, op) / benchmark_kernel_time_ns(kernels, gpu, op);

    CheckRow row;
    row.kind = "gemm";
    row.shape = shape_text(gemm.shape);
    row.origin = gemm.origin;
    const std::vector<double> times_ns = at_reference_clock(timed, reference_MHz);
    row.measured_us = median_of(times_ns) * 1e-3;
    row.measured_raw_us = median_of(as_timed(timed, &Measurement::median_ns)) * 1e-3;
    row.sm_clock_MHz = median_of(as_timed(timed, &Measurement::sm_clock_MHz));
    // The benchmark price: no in-situ ratio of folded training steps (compute_time_ns applied h100-x1's, 1.11-1.18,
    // and made the check of 2026-11-28 read interpolation 3.4-16.3% slow), no training clock, no launch overhead.
    row.predicted_us = benchmark_kernel_time_ns(kernels, gpu, op) * 1e-3;
    row.limit_pct = kGemmLimitPct;
    row.tflops = gemm_flops(gemm.shape) / (row.measured_us * 1e6);
    const auto [low, high] = std::minmax_element(times_ns.begin(), times_ns.end());
    row.spread_pct = 100 * (*high - *low) / (row.measured_us * 1e3);
    row.neighbours_now_us = row.predicted_us * neighbours_move;
    row.kernel = timed.rounds.back().kernel;
    spdlog::info("[check] GEMM {} ({}): measured {:.1f} us at {:.0f} MHz, {:.1f} us at the reference clock (rounds "
                 "within {:.1f}%), predicted {:.1f} us ({:+.1f}%), from the neighbours re-timed now {:.1f} us", row.shape,
                 row.origin, row.measured_raw_us, row.sm_clock_MHz, row.measured_us, row.spread_pct, row.predicted_us,
                 row.error_pct(), row.neighbours_now_us);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace twin::gpu
