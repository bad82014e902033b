// Row-major C = A B is column-major C^T = B^T A^T: cuBLASLt's first operand is our B, its second our A,
// and a row-major [r,c] matrix is a column-major c x r one with leading dimension c.
#include "calibrate/gpu/gemm_bench.hpp"

#include <algorithm>
#include <vector>

#include "calibrate/gpu/checks.hpp"
#include "calibrate/gpu/fit.hpp"

namespace twin::gpu {
namespace {

struct LtLayout {
  cublasLtMatrixLayout_t layout = nullptr;
  LtLayout(std::int64_t rows, std::int64_t cols, std::int64_t ld, int count) {
    TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, CUDA_R_16BF, rows, cols, ld));
    if (count > 1) {
      const std::int64_t stride = rows * cols;
      TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
      TWIN_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                         sizeof(stride)));
    }
  }
  ~LtLayout() { cublasLtMatrixLayoutDestroy(layout); }
};

}  // namespace

std::size_t gemm_a_elements(const GemmShape& s) { return static_cast<std::size_t>(s.m * s.k) * s.count; }
std::size_t gemm_b_elements(const GemmShape& s) { return static_cast<std::size_t>(s.k * s.n) * s.count; }
std::size_t gemm_c_elements(const GemmShape& s) { return static_cast<std::size_t>(s.m * s.n) * s.count; }
double gemm_flops(const GemmShape& s) { return 2.0 * static_cast<double>(s.m) * s.n * s.k * s.count; }

GemmBench::GemmBench(cudaStream_t stream) : stream_(stream), workspace_(kWorkspaceBytes) {
  TWIN_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

GemmBench::~GemmBench() { cublasLtDestroy(handle_); }

void GemmBench::launch(const GemmShape& shape, const void* a, const void* b, void* c) {
  cublasLtMatmulDesc_t desc = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_first = shape.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;   // our B
  const cublasOperation_t op_second = shape.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // our A
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof(op_first)));
  TWIN_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof(op_second)));
  // Stored (column-major) shapes: B^T is n x k (ld n), or k x n (ld k) when B is stored [n,k].
  LtLayout first(shape.transpose_b ? shape.k : shape.n, shape.transpose_b ? shape.n : shape.k,
                 shape.transpose_b ? shape.k : shape.n, shape.count);
  LtLayout second(shape.transpose_a ? shape.m : shape.k, shape.transpose_a ? shape.k : shape.m,
                  shape.transpose_a ? shape.m : shape.k, shape.count);
  LtLayout out(shape.n, shape.m, shape.n, shape.count);

  cublasLtMatmulPreference_t preference = nullptr;
  TWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  const std::size_t workspace_bytes = workspace_.bytes();
  TWIN_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  TWIN_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, desc, first.layout, second.layout, out.layout, out.layout,
                                                   preference, 1, &heuristic, &found));
  cublasLtMatmulPreferenceDestroy(preference);
  if (found == 0) {
    cublasLtMatmulDescDestroy(desc);
    throw std::runtime_error("cuBLASLt has no algorithm for this GEMM shape");
  }
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t status = cublasLtMatmul(handle_, desc, &alpha, b, first.layout, a, second.layout, &beta, c,
                                               out.layout, c, out.layout, &heuristic.algo, workspace_.data(),
                                               workspace_bytes, stream_);
  cublasLtMatmulDescDestroy(desc);
  TWIN_CUBLAS_CHECK(status);
}

std::optional<Measurement> GemmBench::measure(const GemmShape& shape, CuptiKernelTimer& timer, int warmup,
                                              int repetitions, std::size_t max_bytes) {
  const std::size_t set_bytes = 2 * (gemm_a_elements(shape) + gemm_b_elements(shape));
  const std::size_t c_bytes = 2 * gemm_c_elements(shape);
  if (set_bytes + c_bytes > max_bytes) return std::nullopt;
  int device = 0, l2_bytes = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  const std::size_t wanted_sets = std::clamp<std::size_t>(2 * static_cast<std::size_t>(l2_bytes) / set_bytes + 1, 1, 8);
  const std::size_t sets = std::max<std::size_t>(1, std::min(wanted_sets, (max_bytes - c_bytes) / set_bytes));

  std::vector<DeviceBuffer> a_sets, b_sets;
  for (std::size_t i = 0; i < sets; ++i) {
    a_sets.emplace_back(2 * gemm_a_elements(shape));
    b_sets.emplace_back(2 * gemm_b_elements(shape));
    fill_random_bf16(a_sets.back().data(), gemm_a_elements(shape), 2 * i + 1, stream_);
    fill_random_bf16(b_sets.back().data(), gemm_b_elements(shape), 2 * i + 2, stream_);
  }
  DeviceBuffer c(c_bytes);
  for (int i = 0; i < warmup; ++i) launch(shape, a_sets[i % sets].data(), b_sets[i % sets].data(), c.data());
  timer.collect();  // drop the warm-up and fill records

  const std::uint64_t first_region = next_region_;
  for (int i = 0; i < repetitions; ++i) {
    timer.begin_region(next_region_++);
    launch(shape, a_sets[i % sets].data(), b_sets[i % sets].data(), c.data());
    timer.end_region();
  }
  const auto spans = region_spans_ns(timer.collect());
  std::vector<double> samples;
  for (const auto& [region, span_ns] : spans)
    if (region >= first_region) samples.push_back(span_ns);
  if (samples.size() != static_cast<std::size_t>(repetitions))
    throw std::runtime_error("CUPTI returned kernel records for " + std::to_string(samples.size()) + " of " +
                             std::to_string(repetitions) + " GEMM repetitions");
  return summarize(samples);
}

}  // namespace twin::gpu
