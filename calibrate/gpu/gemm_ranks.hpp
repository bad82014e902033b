// The GEMM grid over every GPU of a calibration: each rank times its share (calibrate/gemm_schedule.hpp) and the
// agreement shapes, keeps a partial file as it goes (calibrate/gemm_partial.hpp), and the timings are gathered
// to rank 0 and merged in shape order (calibrate/gemm_merge.hpp).
#pragma once
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nccl.h>
#include <nlohmann/json.hpp>

#include "calibrate/gemm_merge.hpp"
#include "calibrate/gemm_partial.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "core/cluster.hpp"
#include "core/op.hpp"

namespace twin::gpu {

struct GemmRanksRequest {
  std::vector<GemmShape> shapes;       // distinct, the same list on every rank
  GpuSpec gpu;                         // for the cost estimates that split and batch the work
  bool quick = false;
  bool quiet = false;                  // no progress line
  double reference_sm_clock_MHz = 0;   // 0: the median clock of the timings; else the profile's (shapes added)
  std::size_t min_measured = 2;
  ncclComm_t world = nullptr;          // nullptr with one rank
  int rank = 0, world_size = 1;
  std::filesystem::path partial;       // this rank's partial file (gemm_partial_path)
  nlohmann::json arguments;            // the options that chose the work, for the partial file's identity
  std::string gpu_uuid;
  double heat_s = kHeatSeconds;        // the heating before the GEMMs (kHeatAfterLoadSeconds after the clock loads)
};

// What this rank times: its share of the shapes, what its partial file already holds, and that file's identity.
struct GemmRankPlan {
  std::vector<std::vector<std::size_t>> shares;  // every rank's shape indices (gemm_rank_shares)
  std::vector<GemmShape> mine;
  std::vector<double> cost_ns;                   // per shape of `mine`: one round's estimated kernel time
  nlohmann::json identity;
  GemmPartialTimings done;
};
// Collective over the ranks (they check that they hold the same shapes). Throws InputError when this rank's
// partial file was made by another calibration: called before anything is measured, so that it fails at once.
GemmRankPlan plan_gemm_rank(const GemmRanksRequest& request);

// On rank 0 the merged calibration; on the other ranks an empty one (their timings went to rank 0).
GemmCalibration calibrate_gemms_on_ranks(const GemmRanksRequest& request, const GemmRankPlan& plan);

// This device's UUID as 32 hex digits.
std::string device_uuid(int device);

}  // namespace twin::gpu
