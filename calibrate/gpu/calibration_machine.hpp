// What `twin calibrate` measures of the machine around the kernels: each rank's usable memory and host, its host's
// pace of issuing grouped GEMM calls, and
// with several ranks the NCCL collectives over every group size and placement and the interference between a
// GEMM and an all-reduce; and the facts a profile's provenance records (versions, date, preset).
#pragma once
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nccl.h>
#include <nlohmann/json.hpp>

#include "calibrate/gpu/calibration.hpp"
#include "calibrate/gpu/interference.hpp"
#include "core/cluster.hpp"
#include "core/launch_environment.hpp"
#include "cost/profile.hpp"

namespace twin::gpu {

struct MachineFacts {
  nlohmann::json usable_memory;  // per rank: rank, host, usable bytes and GiB
  std::set<std::string> hosts;
  std::vector<CollectiveTable> tables;  // with several ranks and measure_links
  std::optional<InterferenceMeasurement> interference;
  std::vector<InterferencePairTiming> interference_points;  // with `interference`
  double grouped_gemm_issue_ns = 0;  // the mean over ranks (calibrate/gpu/host_issue.hpp)
};

// Every rank calls it (the exchanges are collective over `world`). Without `measure_links` (a profile's shapes
// added) only memory and hosts.
MachineFacts measure_machine(ncclComm_t world, const RankIdentity& identity, const cudaDeviceProp& props,
                             const GpuSpec& spec, const CalibrationRequest& request, bool measure_links,
                             const std::function<void(const std::string&)>& progress);

// The datasheet preset of the device (efficiencies are fractions of its peaks); throws when none matches.
std::string preset_for_device(const cudaDeviceProp& props);
nlohmann::json versions();  // driver, CUDA, NCCL, cuBLASLt, CUPTI
std::string utc_now();

}  // namespace twin::gpu
