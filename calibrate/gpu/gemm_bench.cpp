// GEMM timing: the executor's GEMM paths (cuBLASLt for one problem, its grouped GEMM for the experts'
// `count` problems) under CUPTI regions, on rotating input sets so that the L2 cache does not hold a small
// problem's operands between repetitions, between two clock probes (calibrate/gpu/clock_probe.hpp).
#include "calibrate/gpu/gemm_bench.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "gpu/checks.hpp"
#include "gpu/fp8_cast.hpp"
#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gemm_schedule.hpp"
#include "calibrate/gpu/fit.hpp"

namespace twin::gpu {

std::size_t gemm_a_elements(const GemmShape& s) { return static_cast<std::size_t>(s.m * s.k) * s.count; }
std::size_t gemm_b_elements(const GemmShape& s) { return static_cast<std::size_t>(s.k * s.n) * s.count; }
std::size_t gemm_c_elements(const GemmShape& s) { return static_cast<std::size_t>(s.m * s.n) * s.count; }

void fill_operand(const GemmShape& shape, void* data, std::size_t elements, std::uint64_t seed, cudaStream_t stream) {
  if (is_fp8(shape)) {
    kernels::fill_random_fp8(data, elements, seed, stream);
    return;
  }
  fill_random_bf16(data, elements, seed, stream);
}

GemmBench::GemmBench(cudaStream_t stream)
    : stream_(stream), matmul_(kWorkspaceBytes), fp8_(kWorkspaceBytes), unit_scales_(8 * sizeof(float)) {
  const float ones[8] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  TWIN_CUDA_CHECK(cudaMemcpy(unit_scales_.data(), ones, sizeof(ones), cudaMemcpyHostToDevice));
}

const float* GemmBench::block_scales(std::size_t floats) {
  if (block_scales_.bytes() < floats * sizeof(float)) {
    const std::vector<float> ones(floats, 1.0f);
    block_scales_ = DeviceBuffer(floats * sizeof(float));
    TWIN_CUDA_CHECK(cudaMemcpy(block_scales_.data(), ones.data(), floats * sizeof(float), cudaMemcpyHostToDevice));
  }
  return static_cast<const float*>(block_scales_.data());
}

void GemmBench::launch(const GemmShape& shape, const void* a, const void* b, void* c) {
  if (is_fp8(shape)) {
    const bool blocks = shape.inputs == GemmInputs::fp8_blockwise || shape.inputs == GemmInputs::fp8_blockwise_1d;
    if ((shape.inputs != GemmInputs::fp8_per_tensor && !blocks) || shape.count != 1)
      throw std::invalid_argument("GEMM calibration: " + gemm_key(shape) +
                                  ": FP8 GEMMs are timed per tensor or per block, one problem at a time");
    const exec::Fp8MatmulProblem problem = exec::fp8_problem_of(shape);
    const auto* scales = static_cast<const float*>(unit_scales_.data());
    const float* block = blocks ? block_scales(static_cast<std::size_t>(
                                      std::max(kernels::fp8_block_scale_floats(problem.a_scaling, shape.m, shape.k),
                                               kernels::fp8_block_scale_floats(problem.b_scaling, shape.n, shape.k))))
                                : nullptr;
    fp8_.run(problem, a, blocks ? block : scales, b, blocks ? block : scales + 4, static_cast<__nv_bfloat16*>(c),
             stream_);
    return;
  }
  const auto* a16 = static_cast<const __nv_bfloat16*>(a);
  const auto* b16 = static_cast<const __nv_bfloat16*>(b);
  auto* c16 = static_cast<__nv_bfloat16*>(c);
  if (shape.count <= 1) {
    matmul_.run({shape.m, shape.n, shape.k, shape.transpose_a, shape.transpose_b, false, 1}, a16, b16, c16, stream_);
    return;
  }
  // The experts' GEMMs: count equal products back to back, one group each, as the executor runs them.
  std::vector<exec::GemmGroup> groups(shape.count);
  for (std::int32_t g = 0; g < shape.count; ++g)
    groups[g] = {shape.m, shape.n, shape.k, a16 + g * shape.m * shape.k, b16 + g * shape.k * shape.n,
                 c16 + g * shape.m * shape.n};
  grouped_.run(groups, shape.transpose_a, shape.transpose_b, false, stream_);
}

std::optional<Measurement> GemmBench::measure(const GemmShape& shape, CuptiKernelTimer& timer, int warmup,
                                              int repetitions, std::size_t max_bytes) {
  int device = 0, l2_bytes = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device));
  // The batched timer's rule for the input sets (calibrate/gemm_schedule.hpp), so that both time the same thing.
  const auto layout = gemm_operand_layout(shape, static_cast<std::size_t>(l2_bytes), max_bytes);
  if (!layout) return std::nullopt;
  const std::size_t sets = layout->sets;
  const std::size_t c_bytes = 2 * gemm_c_elements(shape);

  std::vector<DeviceBuffer> a_sets, b_sets;
  for (std::size_t i = 0; i < sets; ++i) {
    a_sets.emplace_back(2 * gemm_a_elements(shape));
    b_sets.emplace_back(2 * gemm_b_elements(shape));
    fill_operand(shape, a_sets.back().data(), gemm_a_elements(shape), 2 * i + 1, stream_);
    fill_operand(shape, b_sets.back().data(), gemm_b_elements(shape), 2 * i + 2, stream_);
  }
  DeviceBuffer c(c_bytes);
  for (int i = 0; i < warmup; ++i) launch(shape, a_sets[i % sets].data(), b_sets[i % sets].data(), c.data());
  timer.collect();  // drop the warm-up and fill records

  // The SM clock just before and just after the timed runs: one probe region on each side.
  const std::uint64_t probe_before = next_region_++;
  timer.begin_region(probe_before);
  launch_clock_probe(stream_);
  timer.end_region();
  const std::uint64_t first_region = next_region_;
  for (int i = 0; i < repetitions; ++i) {
    timer.begin_region(next_region_++);
    launch(shape, a_sets[i % sets].data(), b_sets[i % sets].data(), c.data());
    timer.end_region();
  }
  const std::uint64_t probe_after = next_region_++;
  timer.begin_region(probe_after);
  launch_clock_probe(stream_);
  timer.end_region();
  const std::vector<KernelRecord> records = timer.collect();
  last_kernel_.clear();
  for (const KernelRecord& r : records)
    if (r.region == first_region && !r.is_memcpy) last_kernel_ += (last_kernel_.empty() ? "" : "+") + r.name;
  const auto spans = region_spans_ns(records);
  if (!spans.count(probe_before) || !spans.count(probe_after))
    throw std::runtime_error("CUPTI returned no kernel record for a clock probe");
  last_sm_clock_MHz_ = (clock_probe_MHz(spans.at(probe_before)) + clock_probe_MHz(spans.at(probe_after))) / 2;
  std::vector<double> samples;
  for (const auto& [region, span_ns] : spans)
    if (region >= first_region && region < probe_after) samples.push_back(span_ns);
  if (samples.size() != static_cast<std::size_t>(repetitions))
    throw std::runtime_error("CUPTI returned kernel records for " + std::to_string(samples.size()) + " of " +
                             std::to_string(repetitions) + " GEMM repetitions");
  return summarize(samples);
}

}  // namespace twin::gpu
