// Collectives first, while every rank is alive (groups of the first g ranks, as calibration splits them);
// then the GEMMs and attention on rank 0 alone (calibrate/gpu/gemm_check.hpp, attention_check.hpp). Predictions go through the code the
// simulator runs: collective_table_time_us for the tables and benchmark_kernel_time_ns for GEMMs (the micro-benchmark basis).
#include "calibrate/gpu/profile_check.hpp"

#include <filesystem>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cost/collective_tables.hpp"
#include "calibrate/gemm_grid.hpp"
#include "calibrate/gemm_shapes_file.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "calibrate/gpu/attention_check.hpp"
#include "calibrate/gpu/gemm_check.hpp"
#include "calibrate/gpu/nccl_bench.hpp"
#include "calibrate/model_fit.hpp"
#include "cost/profile.hpp"
#include "core/atomic_file.hpp"
#include "core/cluster.hpp"

namespace twin::gpu {
namespace {

constexpr double kCollectiveLimitPct = 10;

// 3 * 4^i KiB: 12 KiB .. 768 MiB, each between two of calibration's power-of-two sizes.
std::vector<Bytes> check_sizes(Bytes max_bytes) {
  std::vector<Bytes> sizes;
  for (Bytes s = 3 * 4096; s <= max_bytes; s *= 4) sizes.push_back(s);
  return sizes;
}

std::vector<CheckRow> check_collectives(const Profile& profile, const RankIdentity& identity, Bytes max_bytes) {
  std::vector<CheckRow> rows;
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    ncclComm_t world = nullptr;
    ncclUniqueId id{};
    TWIN_NCCL_CHECK(ncclGetUniqueId(&id));  // NCCL_COMM_ID makes every rank's id the same
    TWIN_NCCL_CHECK(ncclCommInitRank(&world, identity.world_size, id, identity.rank));
    CollectiveBench bench(max_bytes, stream);
    for (int group_size = 2; group_size <= identity.world_size; ++group_size) {
      ncclComm_t group = nullptr;
      TWIN_NCCL_CHECK(ncclCommSplit(world, identity.rank < group_size ? 0 : NCCL_SPLIT_NOCOLOR, identity.rank, &group,
                                    nullptr));
      for (const CollectiveTable& table : profile.collectives) {
        // One node: the local launcher's ranks share a host, so the group of the first g is g per node.
        if (table.group_size != group_size || table.nodes != 1) continue;
        for (Bytes requested : check_sizes(max_bytes)) {
          const Bytes size = collective_size_bytes(table.collective, requested, group_size);
          if (size > table.points.back().size_bytes) continue;
          if (group == nullptr) continue;  // outside this group: the split above was the collective call
          const CollectivePoint measured = bench.measure(group, table.collective, size);
          CheckRow row;
          row.kind = to_string(table.collective);
          row.shape = fmt::format("S={}", size);
          row.ranks = group_size;
          row.size_bytes = static_cast<double>(size);
          row.measured_us = measured.time_us;
          row.predicted_us = collective_table_time_us(table, row.size_bytes);
          row.limit_pct = kCollectiveLimitPct;
          row.busbw_GBps = measured.busbw_GBps;
          row.profile_busbw_GBps =
              row.size_bytes / (row.predicted_us * 1e3) * busbw_factor(table.collective, group_size);
          row.fit_model_us = collective_fit_time_us(table, row.size_bytes);
          rows.push_back(row);
        }
      }
      if (group != nullptr) TWIN_NCCL_CHECK(ncclCommDestroy(group));
    }
    TWIN_NCCL_CHECK(ncclCommDestroy(world));
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return rows;
}

std::string number(double value) { return value == 0 ? "" : fmt::format("{:.2f}", value); }

}  // namespace

std::string check_table_markdown(const std::vector<CheckRow>& rows) {
  std::string out =
      "| kind | shape | origin | ranks | measured_us | predicted_us | error_pct | limit_pct | TFLOP/s | raw_us | clock_MHz | "
      "spread_pct | neighbours_now_us | busbw_GBps | profile_busbw_GBps | fit_model_us | pass |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  int passed = 0;
  for (const CheckRow& r : rows) {
    passed += r.passes();
    out += fmt::format("| {} | {} | {} | {} | {:.2f} | {:.2f} | {:+.2f} | {:.0f} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                       r.kind, r.shape, r.origin, r.ranks, r.measured_us, r.predicted_us, r.error_pct(), r.limit_pct,
                       number(r.tflops), number(r.measured_raw_us), number(r.sm_clock_MHz), number(r.spread_pct),
                       number(r.neighbours_now_us), number(r.busbw_GBps), number(r.profile_busbw_GBps),
                       number(r.fit_model_us), r.passes() ? "yes" : "NO");
  }
  out += fmt::format("\n{} of {} within their limit (GEMM {:.0f}%, collectives {:.0f}%)\n", passed, rows.size(),
                     kGemmLimitPct, kCollectiveLimitPct);
  return out;
}

std::string check_table_csv(const std::vector<CheckRow>& rows) {
  std::string out = "kind,shape,origin,ranks,size_B,measured_us,predicted_us,error_pct,limit_pct,tflops,raw_us,clock_MHz,"
                    "spread_pct,neighbours_now_us,busbw_GBps,profile_busbw_GBps,fit_model_us,pass,kernel\n";
  for (const CheckRow& r : rows)
    out += fmt::format("{},{},\"{}\",{},{:.0f},{:.3f},{:.3f},{:.3f},{:.0f},{:.2f},{:.3f},{:.0f},{:.2f},{:.3f},{:.2f},{:.2f},{:.3f},{},"
                       "\"{}\"\n",
                       r.kind, r.shape, r.origin, r.ranks, r.size_bytes, r.measured_us, r.predicted_us, r.error_pct(),
                       r.limit_pct, r.tflops, r.measured_raw_us, r.sm_clock_MHz, r.spread_pct, r.neighbours_now_us,
                       r.busbw_GBps, r.profile_busbw_GBps, r.fit_model_us, r.passes() ? "yes" : "no", r.kernel);
  return out;
}

int check_profile_rank(const std::string& profile_path, const std::string& gemm_shapes_path, const std::string& out_dir,
                       long long max_message_bytes, const RankIdentity& identity) {
  if (identity.rank != 0) spdlog::set_level(spdlog::level::warn);
  prepare_nccl_environment(identity);
  TWIN_CUDA_CHECK(cudaSetDevice(identity.local_rank));
  const Profile profile = load_profile(profile_path);
  const std::vector<ModelGemm> shapes =  // read before any GPU work, so that a bad file fails at once
      gemm_shapes_path.empty() ? off_grid_model_gemms() : read_gemm_shapes_file(gemm_shapes_path);
  if (profile.gpus.empty()) throw std::runtime_error(profile_path + ": no GPU kernel profile to check");
  const std::optional<GpuSpec> gpu = gpu_preset(profile.gpus.front().gpu);
  if (!gpu) throw std::runtime_error(profile_path + ": GPU " + profile.gpus.front().gpu + " is not a preset");
  spdlog::info("[check] {} on {} rank(s): {} collective tables, {} measured GEMMs", profile_path, identity.world_size,
               profile.collectives.size(), profile.gpus.front().measured_gemms.size());
  std::vector<CheckRow> rows;
  if (identity.world_size > 1) rows = check_collectives(profile, identity, max_message_bytes);
  if (identity.rank != 0) return 0;
  std::vector<CheckRow> gemms = check_gemms(profile, *gpu, shapes, out_dir);
  // The GEMM shapes file names GEMMs only; the attention check runs with the default shapes.
  if (gemm_shapes_path.empty()) {
    const std::vector<CheckRow> attention = check_attention(profile, *gpu, off_grid_model_attention());
    gemms.insert(gemms.end(), attention.begin(), attention.end());
  }
  gemms.insert(gemms.end(), rows.begin(), rows.end());
  const std::filesystem::path dir(out_dir);
  std::filesystem::create_directories(dir);
  write_file_atomically(dir / "check.csv", check_table_csv(gemms));
  const std::string markdown = check_table_markdown(gemms);
  write_file_atomically(dir / "check.md", markdown);
  fmt::print("{}", markdown);
  for (const CheckRow& r : gemms)
    if (!r.passes()) return 1;
  return 0;
}

}  // namespace twin::gpu
