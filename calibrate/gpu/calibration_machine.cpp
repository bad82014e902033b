// Usable memory is read after the context, NCCL's buffers (a first collective allocates the rest) and a cuBLAS
// workspace exist: what a training step can still allocate.
#include "calibrate/gpu/calibration_machine.hpp"

#include <algorithm>
#include <array>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <unistd.h>

#include <cublasLt.h>
#include <cupti.h>
#include <fmt/format.h>

#include "calibrate/gpu/collective_calibration.hpp"
#include "calibrate/gpu/host_issue.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "core/device_names.hpp"
#include "gpu/checks.hpp"
#include "gpu/device_buffer.hpp"

namespace twin::gpu {

using nlohmann::json;

namespace {

struct HostName {
  std::array<char, 64> text{};
};

}  // namespace

// The datasheet preset of the device (efficiencies are fractions of its peaks).
std::string preset_for_device(const cudaDeviceProp& props) {
  const double memory_GiB = static_cast<double>(props.totalGlobalMem) / kGiB;
  if (auto preset = gpu_preset_for_device_name(props.name, memory_GiB)) return *preset;
  throw std::runtime_error("no GPU preset matches \"" + std::string(props.name) + "\": calibration expresses efficiency as a fraction of a "
                           "preset's datasheet peaks (see core/cluster.cpp)");
}

namespace {
std::string first_line(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::string version_string(int encoded, int major_divisor, int minor_divisor) {
  return fmt::format("{}.{}", encoded / major_divisor, (encoded % major_divisor) / minor_divisor);
}

}  // namespace

json versions() {
  int driver = 0, runtime = 0, nccl = 0;
  cudaDriverGetVersion(&driver);
  cudaRuntimeGetVersion(&runtime);
  ncclGetVersion(&nccl);
  std::uint32_t cupti = 0;
  cuptiGetVersion(&cupti);
  const std::size_t cublas = cublasLtGetVersion();
  return {{"nvidia_driver", first_line("/proc/driver/nvidia/version")},
          {"cuda_driver_api", version_string(driver, 1000, 10)},
          {"cuda_runtime", version_string(runtime, 1000, 10)},
          {"nccl", fmt::format("{}.{}.{}", nccl / 10000, (nccl % 10000) / 100, nccl % 100)},
          {"cublasLt", fmt::format("{}.{}.{}", cublas / 10000, (cublas % 10000) / 100, cublas % 100)},
          {"cupti_api", cupti}};
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::array<char, 32> text{};
  std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text.data();
}


MachineFacts measure_machine(ncclComm_t world, const RankIdentity& identity, const cudaDeviceProp& props,
                             const GpuSpec& spec, const CalibrationRequest& request, bool measure_links,
                             const std::function<void(const std::string&)>& progress) {
  MachineFacts facts;
  json& memory_json = facts.usable_memory;
  memory_json = json::array();
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    // Usable memory: after the context, NCCL's buffers (a first collective allocates the rest) and a cuBLAS workspace.
    DeviceBuffer warm(1 << 20);
    TWIN_NCCL_CHECK(ncclAllReduce(warm.data(), warm.data(), (1 << 20) / 4, ncclFloat32, ncclSum, world, stream));
    TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::int64_t usable_bytes = 0;
    {
      cublasLtHandle_t handle = nullptr;
      TWIN_CUBLAS_CHECK(cublasLtCreate(&handle));
      DeviceBuffer workspace(64ull << 20);
      std::size_t free_bytes = 0, total_bytes = 0;
      TWIN_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
      usable_bytes = static_cast<std::int64_t>(free_bytes);
      cublasLtDestroy(handle);
    }
    HostName host;
    gethostname(host.text.data(), host.text.size() - 1);
    const auto all_usable = all_gather_values(world, identity.world_size, usable_bytes);
    const auto all_hosts = all_gather_values(world, identity.world_size, host);
    std::vector<std::uint64_t> node_of_rank;
    std::vector<std::string> host_names;
    for (const HostName& h : all_hosts) host_names.emplace_back(h.text.data());
    for (int r = 0; r < identity.world_size; ++r) {
      const auto first = std::find(host_names.begin(), host_names.end(), host_names[r]);
      node_of_rank.push_back(static_cast<std::uint64_t>(first - host_names.begin()));
      facts.hosts.insert(host_names[r]);
      memory_json.push_back({{"rank", r}, {"host", host_names[r]}, {"usable_bytes", all_usable[r]},
                             {"usable_GiB", static_cast<double>(all_usable[r]) / kGiB}});
    }
    progress(fmt::format("usable memory on rank 0: {:.2f} GiB of {:.2f} GiB", usable_bytes / kGiB,
                         static_cast<double>(props.totalGlobalMem) / kGiB));
    const std::vector<double> issue_ns = all_gather_values(world, identity.world_size, measure_grouped_gemm_issue_ns());
    for (double ns : issue_ns) facts.grouped_gemm_issue_ns += ns / identity.world_size;
    progress(fmt::format("the host issues a grouped GEMM's call in {:.1f} us (mean over ranks)", facts.grouped_gemm_issue_ns / 1e3));

    if (measure_links && identity.world_size > 1) {
      CollectiveCalibrationOptions options;
      options.max_bytes = request.max_message_bytes;
      options.quick = request.quick;
      options.nominal_intra_node_GBps = spec.nvlink_bandwidth_GBps > 0 ? spec.nvlink_bandwidth_GBps : spec.pcie_bandwidth_GBps;
      options.progress = progress;
      facts.tables = calibrate_collectives(world, identity.rank, node_of_rank, options);
      facts.interference = measure_interference(world, request.quick);
      progress(fmt::format("overlap: GEMM {:.3f}x slower beside all-reduce, all-reduce {:.3f}x slower beside GEMM",
                           facts.interference->overlap.compute_slowdown, facts.interference->overlap.communication_slowdown));
      facts.interference_points = measure_interference_points(world, identity.world_size, request.quick);
      progress(fmt::format("overlap: {} pairs of a collective and a compute kernel measured", facts.interference_points.size()));
    }
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  return facts;
}

}  // namespace twin::gpu
