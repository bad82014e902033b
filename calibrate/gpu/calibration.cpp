// The rank program. NCCL work comes first, while every rank is alive; the GEMM grid runs on rank 0
// alone afterwards so that no other traffic disturbs it.
#include "calibrate/gpu/calibration.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <fstream>
#include <set>
#include <unistd.h>

#include <cublasLt.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/attention_implementation.hpp"
#include "core/kernel_revisions.hpp"
#include "gpu/checks.hpp"
#include "calibrate/gpu/collective_calibration.hpp"
#include "gpu/device_buffer.hpp"
#include "calibrate/gpu/gemm_calibration.hpp"
#include "calibrate/gpu/interference.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"
#include "core/device_names.hpp"
#include "gpu/launcher.hpp"
#include "calibrate/gpu/profile_check.hpp"
#include "calibrate/calibration_base.hpp"
#include "calibrate/gemm_grid.hpp"
#include "cost/gemm_predictor.hpp"
#include "cost/profile.hpp"
#include "core/cluster.hpp"

namespace twin::gpu {
namespace {

using nlohmann::json;

// The datasheet preset of the device (efficiencies are fractions of its peaks).
std::string preset_for_device(const cudaDeviceProp& props) {
  const double memory_GiB = static_cast<double>(props.totalGlobalMem) / kGiB;
  if (auto preset = gpu_preset_for_device_name(props.name, memory_GiB)) return *preset;
  throw std::runtime_error("no GPU preset matches \"" + std::string(props.name) + "\": calibration expresses efficiency as a fraction of a "
                           "preset's datasheet peaks (see core/cluster.cpp)");
}

std::string first_line(const char* path) {
  std::ifstream file(path);
  std::string line;
  std::getline(file, line);
  return line;
}

std::string version_string(int encoded, int major_divisor, int minor_divisor) {
  return fmt::format("{}.{}", encoded / major_divisor, (encoded % major_divisor) / minor_divisor);
}

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

// All-gathers one fixed-size value per rank through NCCL (rank order).
template <typename T>
std::vector<T> all_gather_values(ncclComm_t world, int world_size, const T& mine, cudaStream_t stream) {
  DeviceBuffer send(sizeof(T)), recv(sizeof(T) * world_size);
  std::vector<T> out(world_size);
  TWIN_CUDA_CHECK(cudaMemcpy(send.data(), &mine, sizeof(T), cudaMemcpyHostToDevice));
  TWIN_NCCL_CHECK(ncclAllGather(send.data(), recv.data(), sizeof(T), ncclUint8, world, stream));
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  TWIN_CUDA_CHECK(cudaMemcpy(out.data(), recv.data(), sizeof(T) * world_size, cudaMemcpyDeviceToHost));
  return out;
}

struct HostName {
  std::array<char, 64> text{};
};

int run_rank(const CalibrationRequest& request, const RankIdentity& identity) {
  const auto started = std::chrono::steady_clock::now();
  if (identity.rank != 0) spdlog::set_level(spdlog::level::warn);
  auto progress = [&](const std::string& line) { spdlog::info("[calibrate] {}", line); };
  prepare_nccl_environment(identity);
  TWIN_CUDA_CHECK(cudaSetDevice(identity.local_rank));
  cudaDeviceProp props{};
  TWIN_CUDA_CHECK(cudaGetDeviceProperties(&props, identity.local_rank));
  const std::string preset_name = preset_for_device(props);
  const std::optional<GpuSpec> spec = gpu_preset(preset_name);
  if (!spec) throw std::runtime_error("GPU preset " + preset_name + " is missing from core/cluster.cpp");
  progress(fmt::format("{} ranks ({}), {} = preset {}", identity.world_size, identity.launcher, props.name, preset_name));

  json memory_json = json::array();
  std::vector<CollectiveTable> tables;
  std::optional<InterferenceMeasurement> interference;
  std::set<std::string> hosts;
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    ncclComm_t world = nullptr;
    ncclUniqueId id{};
    TWIN_NCCL_CHECK(ncclGetUniqueId(&id));  // with NCCL_COMM_ID set, every rank derives the same id
    TWIN_NCCL_CHECK(ncclCommInitRank(&world, identity.world_size, id, identity.rank));
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
    const auto all_usable = all_gather_values(world, identity.world_size, usable_bytes, stream);
    const auto all_hosts = all_gather_values(world, identity.world_size, host, stream);
    std::vector<std::uint64_t> node_of_rank;
    std::vector<std::string> host_names;
    for (const HostName& h : all_hosts) host_names.emplace_back(h.text.data());
    for (int r = 0; r < identity.world_size; ++r) {
      const auto first = std::find(host_names.begin(), host_names.end(), host_names[r]);
      node_of_rank.push_back(static_cast<std::uint64_t>(first - host_names.begin()));
      hosts.insert(host_names[r]);
      memory_json.push_back({{"rank", r}, {"host", host_names[r]}, {"usable_bytes", all_usable[r]},
                             {"usable_GiB", static_cast<double>(all_usable[r]) / kGiB}});
    }
    progress(fmt::format("usable memory on rank 0: {:.2f} GiB of {:.2f} GiB", usable_bytes / kGiB,
                         static_cast<double>(props.totalGlobalMem) / kGiB));

    if (identity.world_size > 1) {
      CollectiveCalibrationOptions options;
      options.max_bytes = request.max_message_bytes;
      options.quick = request.quick;
      options.nominal_intra_node_GBps = spec->nvlink_bandwidth_GBps > 0 ? spec->nvlink_bandwidth_GBps : spec->pcie_bandwidth_GBps;
      options.progress = progress;
      tables = calibrate_collectives(world, identity.rank, node_of_rank, options);
      interference = measure_interference(world, request.quick);
      progress(fmt::format("overlap: GEMM {:.3f}x slower beside all-reduce, all-reduce {:.3f}x slower beside GEMM",
                           interference->overlap.compute_slowdown, interference->overlap.communication_slowdown));
    }
    TWIN_NCCL_CHECK(ncclCommDestroy(world));
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  if (identity.rank != 0) return 0;

  const GemmGrid grid = default_gemm_grid(request.quick, *spec);
  std::vector<GemmShape> shapes = grid.shapes;
  progress(fmt::format("GEMM grid: {} shapes ({} half-octave shapes estimated over {:.0f} ms left out), about {:.0f} s "
                       "of GPU kernel time estimated from the built-in profile",
                       grid.shapes.size(), grid.left_out_slow, kGemmGridMaxKernelNs * 1e-6,
                       estimated_gemm_calibration_seconds(grid.shapes, *spec, request.quick)));
  if (!request.scenario.empty()) {
    const std::vector<GemmShape> needed = scenario_gemm_shapes(request.scenario);
    progress(fmt::format("scenario {}: {} distinct GEMM shapes, about {:.0f} s of GPU kernel time", request.scenario,
                         needed.size(), estimated_gemm_calibration_seconds(needed, *spec, request.quick)));
    shapes.insert(shapes.end(), needed.begin(), needed.end());
  }
  const GemmCalibration gemms = calibrate_gemms(shapes, spec->peak_bf16_tflops, request.quick, progress);

  Profile profile = builtin_profile();
  GpuKernelProfile kernels = calibration_base(*spec, preset_name);
  kernels.gemm = gemms.efficiency;
  kernels.reference_sm_clock_MHz = gemms.reference_sm_clock_MHz;
  for (const auto& [shape, m] : gemms.measured) kernels.measured[gemm_key(shape)] = m;
  index_measured_shapes(kernels);
  const json kernel_summary = calibrate_kernels_into(kernels, request.scenario, *spec, request.quick, progress);
  profile.gpus = {kernels};
  profile.builtin = false;
  profile.name = fmt::format("calibrated {}x {} ({})", identity.world_size, preset_name, *hosts.begin());
  json measured_parts = {"gemm"};
  const CollectiveTable* widest = nullptr;
  for (const CollectiveTable& t : tables)
    if (t.collective == OpKind::all_reduce && t.nodes == 1 && (!widest || t.group_size > widest->group_size)) widest = &t;
  if (widest) {
    profile.intra_node = widest->fit;
    measured_parts.push_back("intra_node (all_reduce over " + std::to_string(widest->group_size) + " GPUs)");
  }
  for (const CollectiveTable& t : tables)
    if (t.collective == OpKind::all_reduce && t.nodes > 1) profile.inter_node = t.fit;
  if (interference) {
    // The profile format holds slowdowns >= 1; the raw ratios stay in provenance.
    profile.overlap.compute_slowdown = std::max(1.0, interference->overlap.compute_slowdown);
    profile.overlap.communication_slowdown = std::max(1.0, interference->overlap.communication_slowdown);
    measured_parts.push_back("overlap");
  }
  for (CollectiveTable& t : tables) t.gpu = preset_name;
  profile.collectives = tables;
  if (!tables.empty()) measured_parts.push_back("collectives");

  // Kernels (memory-bound ops, attention) are measured above; what stays an estimate is listed here.
  measured_parts.push_back("memory_bound");
  measured_parts.push_back("attention_forward");
  measured_parts.push_back("attention_backward");
  json estimated_parts = {"launch_overhead_ns", "intra_node_pcie"};
  if (!widest) estimated_parts.push_back("intra_node");
  if (std::none_of(tables.begin(), tables.end(), [](const CollectiveTable& t) { return t.nodes > 1; }))
    estimated_parts.push_back("inter_node");
  if (!interference) estimated_parts.push_back("overlap");
  json skipped = json::array();
  for (const GemmShape& s : gemms.skipped) skipped.push_back(gemm_key(s));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string command;
  for (const std::string& a : own_command_line()) command += (command.empty() ? "" : " ") + a;
  profile.provenance = {
      {"tool", "twin calibrate"},
      {"gpu", props.name},
      {"gpu_preset", preset_name},
      {"gpu_spec", {{"peak_bf16_tflops", spec->peak_bf16_tflops}, {"hbm_bandwidth_GBps", spec->hbm_bandwidth_GBps},
                    {"nvlink_bandwidth_GBps", spec->nvlink_bandwidth_GBps}}},
      {"gpu_count", identity.world_size},
      {"hosts", json(std::vector<std::string>(hosts.begin(), hosts.end()))},
      {"launcher", identity.launcher},
      {"versions", versions()},
      {"date_utc", utc_now()},
      {"command", command},
      {"quick", request.quick},
      {"scenario", request.scenario},
      {"calibration_seconds", seconds},
      {"measured", measured_parts},
      {"estimated_from_builtin", estimated_parts},
      {"gemm_timing", "CUPTI kernel spans, cuBLASLt bf16 in/out fp32 compute, random data, median/p10/p90, scaled "
                      "from the SM clock of each timing (a spinning probe kernel) to reference_sm_clock_MHz"},
      {"gemm_reference_sm_clock_MHz", gemms.reference_sm_clock_MHz},
      {"attention", to_string(kDefaultAttentionImplementation)},
      {"kernel_revisions", executor_kernel_revisions_json()},
      {"gemm_shapes_measured", gemms.measured.size()},
      {"gemm_shapes_skipped", skipped},
      {"gemm_best_tflops", gemms.best_tflops},
      {"usable_memory", memory_json},
      {"collective_timing", "nccl-tests: float32, CUDA events around iterations, mean averaged over ranks"}};
  profile.provenance["kernels"] = kernel_summary;
  if (interference)
    profile.provenance["interference"] = {
        {"gemm", gemm_key(interference->gemm)},
        {"all_reduce_bytes", interference->all_reduce_bytes},
        {"gemm_alone_ns", interference->gemm_alone_ns},
        {"gemm_overlapped_ns", interference->gemm_overlapped_ns},
        {"all_reduce_alone_ns", interference->all_reduce_alone_ns},
        {"all_reduce_overlapped_ns", interference->all_reduce_overlapped_ns},
        {"compute_slowdown_raw", interference->overlap.compute_slowdown},
        {"communication_slowdown_raw", interference->overlap.communication_slowdown}};
  save_profile(profile, request.out);
  progress(fmt::format("wrote {} ({} GEMM shapes, {} collective tables) in {:.1f} s", request.out, gemms.measured.size(),
                       tables.size(), seconds));
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
