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
};

// On rank 0 the merged calibration; on the other ranks an empty one (their timings went to rank 0).
GemmCalibration calibrate_gemms_on_ranks(const GemmRanksRequest& request);

// This device's UUID as 32 hex digits.
std::string device_uuid(int device);

}  // namespace twin::gpu
