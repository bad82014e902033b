// Plans warm (two runs first): what is timed is the host's work per call (the bucket's algorithm found, the
// cuBLASLt call enqueued), not the heuristic's first query.
#include "calibrate/gpu/host_issue.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/grouped_matmul.hpp"

namespace twin::gpu {

double measure_grouped_gemm_issue_ns() {
  constexpr std::int64_t kExperts = 128, kRows = 256, kColumns = 1536, kDepth = 2048;
  DeviceBuffer a(2 * kExperts * kRows * kDepth), b(2 * kExperts * kDepth * kColumns), c(2 * kExperts * kRows * kColumns);
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  fill_random_bf16(a.data(), kExperts * kRows * kDepth, 31, stream);
  fill_random_bf16(b.data(), kExperts * kDepth * kColumns, 32, stream);
  const auto* a_data = static_cast<const __nv_bfloat16*>(a.data());
  const auto* b_data = static_cast<const __nv_bfloat16*>(b.data());
  auto* c_data = static_cast<__nv_bfloat16*>(c.data());
  std::vector<exec::GemmGroup> groups;
  for (std::int64_t e = 0; e < kExperts; ++e)
    groups.push_back({kRows, kColumns, kDepth, a_data + e * kRows * kDepth, b_data + e * kDepth * kColumns,
                      c_data + e * kRows * kColumns});
  exec::GroupedMatmul grouped;
  for (int warm = 0; warm < 2; ++warm) grouped.run(groups, false, false, false, stream);
  std::vector<double> per_call_ns;
  for (int repeat = 0; repeat < 7; ++repeat) {
    TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host waited for the device, as after the dispatch's read
    const auto issued_from = std::chrono::steady_clock::now();
    grouped.run(groups, false, false, false, stream);
    const std::chrono::duration<double, std::nano> host = std::chrono::steady_clock::now() - issued_from;
    per_call_ns.push_back(host.count() / kExperts);
  }
  TWIN_CUDA_CHECK(cudaStreamSynchronize(stream));
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
  std::sort(per_call_ns.begin(), per_call_ns.end());
  return per_call_ns[per_call_ns.size() / 2];
}

}  // namespace twin::gpu
