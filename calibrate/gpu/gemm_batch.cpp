// Regions are numbered per batch: a probe, the timed repetitions, a probe, for each shape in turn; after the one
// collect() the spans are read back by region.
#include "calibrate/gpu/gemm_batch.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "calibrate/gpu/clock_probe.hpp"
#include "calibrate/gpu/fit.hpp"
#include "gpu/checks.hpp"
#include "gpu/fp8_cast.hpp"

namespace twin::gpu {

GemmBatchTimer::GemmBatchTimer(GemmBench& bench, CuptiKernelTimer& timer, const std::vector<GemmShape>& shapes,
                               std::size_t max_bytes)
    : bench_(bench), timer_(timer), max_bytes_(max_bytes) {
  int device = 0, l2 = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  l2_bytes_ = static_cast<std::size_t>(l2);
  std::size_t arena_bytes = 0, fp8_arena_bytes = 0;
  for (const GemmShape& shape : shapes)
    if (auto layout = gemm_operand_layout(shape, l2_bytes_, max_bytes_)) {
      std::size_t& bytes = is_fp8(shape) ? fp8_arena_bytes : arena_bytes;
      bytes = std::max(bytes, layout->bytes);
    }
  if (arena_bytes > 0) {
    arena_ = DeviceBuffer(arena_bytes);
    fill_random_bf16(arena_.data(), arena_bytes / 2, 20261128, bench_.stream());
  }
  if (fp8_arena_bytes > 0) {  // laid out as the bf16 shapes' (2 bytes an element): the FP8 operands use half
    fp8_arena_ = DeviceBuffer(fp8_arena_bytes);
    kernels::fill_random_fp8(fp8_arena_.data(), fp8_arena_bytes, 20261129, bench_.stream());
  }
}

void GemmBatchTimer::launch(const GemmShape& shape, const GemmOperandLayout& layout, std::size_t set) {
  auto* base = static_cast<char*>((is_fp8(shape) ? fp8_arena_ : arena_).data());
  const std::size_t s = set % layout.sets;
  bench_.launch(shape, base + layout.a_offsets[s], base + layout.b_offsets[s], base + layout.c_offset);
}

std::vector<std::optional<GemmTiming>> GemmBatchTimer::time(const std::vector<GemmShape>& batch, const GemmRuns& runs,
                                                            const GemmShape& heater, int heater_launches) {
  std::vector<std::optional<GemmOperandLayout>> layouts;
  for (const GemmShape& shape : batch) {
    layouts.push_back(gemm_operand_layout(shape, l2_bytes_, max_bytes_));
    const DeviceBuffer& arena = is_fp8(shape) ? fp8_arena_ : arena_;
    if (layouts.back() && layouts.back()->bytes > arena.bytes()) layouts.back().reset();  // not among the arena's shapes
  }
  if (const auto heat = gemm_operand_layout(heater, l2_bytes_, max_bytes_); heat && heat->bytes <= arena_.bytes())
    for (int i = 0; i < heater_launches; ++i) launch(heater, *heat, i);
  const std::uint64_t first_region = next_region_;
  for (std::size_t j = 0; j < batch.size(); ++j) {
    if (!layouts[j]) continue;
    for (int i = 0; i < runs.warmup; ++i) launch(batch[j], *layouts[j], i);
    timer_.begin_region(next_region_++);
    launch_clock_probe(bench_.stream());
    timer_.end_region();
    for (int i = 0; i < runs.timed; ++i) {
      timer_.begin_region(next_region_++);
      launch(batch[j], *layouts[j], i);
      timer_.end_region();
    }
    timer_.begin_region(next_region_++);
    launch_clock_probe(bench_.stream());
    timer_.end_region();
  }
  const std::vector<KernelRecord> records = timer_.collect();
  const auto spans = region_spans_ns(records);
  std::map<std::uint64_t, std::string> kernels;  // per region: its kernels' names, '+' between them
  for (const KernelRecord& r : records)
    if (r.region >= first_region && !r.is_memcpy) kernels[r.region] += (kernels[r.region].empty() ? "" : "+") + r.name;
  std::vector<std::optional<GemmTiming>> out(batch.size());
  std::uint64_t region = first_region;
  for (std::size_t j = 0; j < batch.size(); ++j) {
    if (!layouts[j]) continue;
    const std::uint64_t probe_before = region, probe_after = region + runs.timed + 1;
    region = probe_after + 1;
    if (!spans.count(probe_before) || !spans.count(probe_after))
      throw std::runtime_error("CUPTI returned no kernel record for a clock probe");
    std::vector<double> samples;
    for (std::uint64_t r = probe_before + 1; r < probe_after; ++r)
      if (auto it = spans.find(r); it != spans.end()) samples.push_back(it->second);
    if (samples.size() != static_cast<std::size_t>(runs.timed))
      throw std::runtime_error(fmt::format("CUPTI returned kernel records for {} of {} GEMM repetitions",
                                           samples.size(), runs.timed));
    GemmTiming timing{summarize(samples), {}};
    timing.measured.sm_clock_MHz = (clock_probe_MHz(spans.at(probe_before)) + clock_probe_MHz(spans.at(probe_after))) / 2;
    timing.kernel = kernels[probe_before + 1];
    out[j] = std::move(timing);
  }
  return out;
}

}  // namespace twin::gpu
