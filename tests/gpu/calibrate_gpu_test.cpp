// GPU checks of twin calibrate's building blocks: cuBLASLt GEMMs in every layout against a CPU
// reference, CUPTI region timing, and NCCL collectives across all local GPUs in one process.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include <cuda_bf16.h>

#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/nccl_bench.hpp"

namespace twin::gpu {
namespace {

int gpu_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

#define REQUIRE_GPUS(n)                                                                   \
  if (gpu_count() < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA GPU(s); found " << gpu_count()

std::vector<float> to_host_floats(const DeviceBuffer& buffer, std::size_t count) {
  std::vector<__nv_bfloat16> raw(count);
  TWIN_CUDA_CHECK(cudaMemcpy(raw.data(), buffer.data(), count * 2, cudaMemcpyDeviceToHost));
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = __bfloat162float(raw[i]);
  return out;
}

class GemmLayouts : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(GemmLayouts, MatchCpuReferenceInBf16Tolerance) {
  REQUIRE_GPUS(1);
  const auto [ta, tb] = GetParam();
  const GemmShape shape{96, 80, 64, 2, ta, tb};
  DeviceBuffer a(2 * gemm_a_elements(shape)), b(2 * gemm_b_elements(shape)), c(2 * gemm_c_elements(shape));
  fill_random_bf16(a.data(), gemm_a_elements(shape), 5, nullptr);
  fill_random_bf16(b.data(), gemm_b_elements(shape), 6, nullptr);
  TWIN_CUDA_CHECK(cudaMemset(c.data(), 0xFF, c.bytes()));  // poison: NaN in bf16
  GemmBench bench(nullptr);
  bench.launch(shape, a.data(), b.data(), c.data());
  TWIN_CUDA_CHECK(cudaDeviceSynchronize());
  const auto ha = to_host_floats(a, gemm_a_elements(shape));
  const auto hb = to_host_floats(b, gemm_b_elements(shape));
  const auto hc = to_host_floats(c, gemm_c_elements(shape));
  const std::int64_t m = shape.m, n = shape.n, k = shape.k;
  double error2 = 0, norm2 = 0;
  for (int g = 0; g < shape.count; ++g)
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          const double av = ta ? ha[g * m * k + p * m + i] : ha[g * m * k + i * k + p];
          const double bv = tb ? hb[g * k * n + j * k + p] : hb[g * k * n + p * n + j];
          ref += av * bv;
        }
        const double got = hc[g * m * n + i * n + j];
        ASSERT_FALSE(std::isnan(got)) << "unwritten output at " << g << "," << i << "," << j;
        error2 += (got - ref) * (got - ref);
        norm2 += ref * ref;
      }
  EXPECT_LT(std::sqrt(error2 / norm2), 1e-2);
}

INSTANTIATE_TEST_SUITE_P(AllTransposeFlags, GemmLayouts,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()));

TEST(CuptiKernelTimer, AttributesEveryRepetitionToItsRegion) {
  REQUIRE_GPUS(1);
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    GemmBench bench(stream);
    CuptiKernelTimer timer;
    const GemmShape shape{2048, 2048, 2048, 1, false, false};
    const auto m = bench.measure(shape, timer, 2, 7, 1ull << 30);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->samples, 7);
    EXPECT_GT(m->median_ns, 1000);  // 17 GFLOP cannot take under a microsecond
    EXPECT_LE(m->p10_ns, m->median_ns);
    EXPECT_LE(m->median_ns, m->p90_ns);
    EXPECT_EQ(timer.dropped_records(), 0u);
    // A memcpy inside a region is recorded but does not count as kernel time.
    DeviceBuffer x(1 << 20), y(1 << 20);
    timer.begin_region(99);
    TWIN_CUDA_CHECK(cudaMemcpyAsync(y.data(), x.data(), 1 << 20, cudaMemcpyDeviceToDevice, stream));
    timer.end_region();
    const auto records = timer.collect();
    bool saw_memcpy = false;
    for (const KernelRecord& r : records) saw_memcpy |= r.is_memcpy && r.region == 99;
    EXPECT_TRUE(saw_memcpy);
    EXPECT_EQ(region_spans_ns(records).count(99), 0u);
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(ClockProbe, ReportsTheSmClockAGemmRanAtAndItsKernel) {
  REQUIRE_GPUS(1);
  int device = 0, peak_kHz = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&peak_kHz, cudaDevAttrClockRate, device));
  cudaStream_t stream = nullptr;
  TWIN_CUDA_CHECK(cudaStreamCreate(&stream));
  {
    GemmBench bench(stream);
    CuptiKernelTimer timer;
    const GemmShape shape{4096, 4096, 4096, 1, false, false};
    std::vector<double> cycles;
    for (int i = 0; i < 2; ++i) {
      const auto m = bench.measure(shape, timer, 3, 10, 1ull << 30);
      ASSERT_TRUE(m.has_value());
      // The reference: the device's peak SM clock; a GPU under load runs at most at it, and not 5x below.
      EXPECT_GT(bench.last_sm_clock_MHz(), peak_kHz / 1e3 / 5);
      EXPECT_LT(bench.last_sm_clock_MHz(), peak_kHz / 1e3 * 1.05);
      EXPECT_FALSE(bench.last_kernel().empty());
      cycles.push_back(m->median_ns * bench.last_sm_clock_MHz());
    }
    // Counted in cycles, two timings of one shape agree even where the clock moved between them.
    EXPECT_NEAR(cycles[1] / cycles[0], 1.0, 0.15);
  }
  TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST(CollectiveBench, AllCollectivesRunAcrossLocalGpusWithNcclTestsBandwidth) {
  REQUIRE_GPUS(2);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const int n = gpu_count();
  std::vector<ncclComm_t> comms(n);
  TWIN_NCCL_CHECK(ncclCommInitAll(comms.data(), n, nullptr));
  std::vector<std::vector<CollectivePoint>> points(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      TWIN_CUDA_CHECK(cudaSetDevice(r));
      cudaStream_t stream = nullptr;
      TWIN_CUDA_CHECK(cudaStreamCreate(&stream));
      {
        CollectiveBench bench(64ll << 20, stream);
        for (OpKind kind : kCalibratedCollectives)
          points[r].push_back(bench.measure(comms[r], kind, collective_size_bytes(kind, 64ll << 20, n)));
      }
      TWIN_CUDA_CHECK(cudaStreamDestroy(stream));
    });
  for (auto& t : threads) t.join();
  for (ncclComm_t c : comms) ncclCommDestroy(c);
  std::size_t i = 0;
  for (OpKind kind : kCalibratedCollectives) {
    const CollectivePoint& p = points[0][i++];
    EXPECT_GT(p.time_us, 0) << to_string(kind);
    EXPECT_NEAR(p.algbw_GBps, p.size_bytes / (p.time_us * 1e3), 1e-9);
    EXPECT_NEAR(p.busbw_GBps, p.algbw_GBps * busbw_factor(kind, n), 1e-9);
    // Averaged over ranks: every rank reports the same row.
    EXPECT_DOUBLE_EQ(points[n - 1][i - 1].time_us, p.time_us);
  }
}

}  // namespace
}  // namespace twin::gpu
