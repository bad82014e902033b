// All all-reduces are queued on the communication stream first, then enough GEMMs on the compute
// stream to cover them; only kernels that ran entirely inside the other stream's busy window count.
#include "calibrate/gpu/interference.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"

namespace twin::gpu {
namespace {

struct Interval {
  std::uint64_t start = 0, end = 0;
};

std::map<std::uint64_t, Interval> region_intervals(const std::vector<KernelRecord>& records) {
  std::map<std::uint64_t, Interval> out;
  for (const KernelRecord& r : records) {
    if (r.region == 0 || r.is_memcpy) continue;
    auto [it, fresh] = out.try_emplace(r.region, Interval{r.start_ns, r.end_ns});
    if (!fresh) {
      it->second.start = std::min(it->second.start, r.start_ns);
      it->second.end = std::max(it->second.end, r.end_ns);
    }
  }
  return out;
}

// Medians of the regions in [first, last] lying inside `window` (all of them when `window` is empty).
double median_inside(const std::map<std::uint64_t, Interval>& intervals, std::uint64_t first, std::uint64_t last,
                     Interval window) {
  std::vector<double> spans;
  for (auto it = intervals.lower_bound(first); it != intervals.end() && it->first <= last; ++it)
    if (window.end == 0 || (it->second.start >= window.start && it->second.end <= window.end))
      spans.push_back(static_cast<double>(it->second.end - it->second.start));
  if (spans.empty()) throw std::runtime_error("interference: no kernel ran inside the overlap window");
  return percentile(spans, 0.5);
}

Interval hull(const std::map<std::uint64_t, Interval>& intervals, std::uint64_t first, std::uint64_t last) {
  Interval h{~0ull, 0};
  for (auto it = intervals.lower_bound(first); it != intervals.end() && it->first <= last; ++it) {
    h.start = std::min(h.start, it->second.start);
    h.end = std::max(h.end, it->second.end);
  }
  return h;
}

}  // namespace

InterferenceMeasurement measure_interference(ncclComm_t world, bool quick) {
  InterferenceMeasurement result;
  result.gemm = GemmShape{8192, 8192, 8192, 1, false, false};
  result.all_reduce_bytes = 256ll << 20;
  const int repetitions = quick ? 10 : 20;

  cudaStream_t compute = nullptr, comm = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
  TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  {
    GemmBench gemm(compute);
    DeviceBuffer a(2 * gemm_a_elements(result.gemm)), b(2 * gemm_b_elements(result.gemm)), c(2 * gemm_c_elements(result.gemm));
    DeviceBuffer reduced(static_cast<std::size_t>(result.all_reduce_bytes));
    const std::size_t floats = static_cast<std::size_t>(result.all_reduce_bytes) / sizeof(float);
    fill_random_bf16(a.data(), gemm_a_elements(result.gemm), 21, compute);
    fill_random_bf16(b.data(), gemm_b_elements(result.gemm), 22, compute);
    fill_random_f32(reduced.data(), floats, 23, comm);
    auto all_reduce = [&] {
      TWIN_NCCL_CHECK(ncclAllReduce(reduced.data(), reduced.data(), floats, ncclFloat32, ncclSum, world, comm));
    };

    CuptiKernelTimer timer;
    std::uint64_t region = 1;
    for (int i = 0; i < 3; ++i) {
      gemm.launch(result.gemm, a.data(), b.data(), c.data());
      all_reduce();
    }
    timer.collect();

    // Alone, one after the other.
    const std::uint64_t gemm_first = region;
    for (int i = 0; i < repetitions; ++i) {
      timer.begin_region(region++);
      gemm.launch(result.gemm, a.data(), b.data(), c.data());
      timer.end_region();
    }
    TWIN_CUDA_CHECK(cudaStreamSynchronize(compute));
    const std::uint64_t ar_first = region;
    for (int i = 0; i < repetitions; ++i) {
      timer.begin_region(region++);
      all_reduce();
      timer.end_region();
    }
    auto alone = region_intervals(timer.collect());
    result.gemm_alone_ns = median_inside(alone, gemm_first, ar_first - 1, {});
    result.all_reduce_alone_ns = median_inside(alone, ar_first, region - 1, {});

    // Together: every rank must issue the same all-reduces, so the count is fixed, not timed per rank.
    const int all_reduces = 3 * repetitions;
    const int gemms = static_cast<int>(std::ceil(all_reduces * result.all_reduce_alone_ns / result.gemm_alone_ns)) + 2;
    const std::uint64_t ar_overlap_first = region;
    for (int i = 0; i < all_reduces; ++i) {
      timer.begin_region(region++);
      all_reduce();
      timer.end_region();
    }
    const std::uint64_t gemm_overlap_first = region;
    for (int i = 0; i < gemms; ++i) {
      timer.begin_region(region++);
      gemm.launch(result.gemm, a.data(), b.data(), c.data());
      timer.end_region();
    }
    auto together = region_intervals(timer.collect());
    const Interval ar_window = hull(together, ar_overlap_first, gemm_overlap_first - 1);
    const Interval gemm_window = hull(together, gemm_overlap_first, region - 1);
    result.gemm_overlapped_ns = median_inside(together, gemm_overlap_first, region - 1, ar_window);
    result.all_reduce_overlapped_ns = median_inside(together, ar_overlap_first, gemm_overlap_first - 1, gemm_window);
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(compute));
  TWIN_CUDA_CHECK(cudaStreamDestroy(comm));
  result.overlap.compute_slowdown = result.gemm_overlapped_ns / result.gemm_alone_ns;
  result.overlap.communication_slowdown = result.all_reduce_overlapped_ns / result.all_reduce_alone_ns;
  return result;
}

}  // namespace twin::gpu
