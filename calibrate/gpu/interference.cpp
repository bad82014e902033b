// One pair at a time: each kernel alone first (regions of one launch), then collectives and compute kernels enqueued
// together, interleaved by their expected finish times so that the host keeps both streams fed; only kernels that
// ran entirely inside the other stream's busy window count. Every rank must issue the same collectives, so their
// count comes from the slowest rank's times.
#include "calibrate/gpu/interference.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <vector>

#include "calibrate/gpu/fit.hpp"
#include "calibrate/gpu/gemm_bench.hpp"
#include "calibrate/gpu/nccl_bench.hpp"
#include "calibrate/gpu/rank_exchange.hpp"
#include "cost/gemm_interpolation_error.hpp"
#include "gpu/checks.hpp"
#include "gpu/cupti_timer.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"

namespace twin::gpu {
namespace {

struct Interval {
  std::uint64_t start = 0, end = 0;
};

// The share of `window` that the regions of `ids` inside it kept busy.
double busy_share(const std::map<std::uint64_t, Interval>& intervals, const std::vector<std::uint64_t>& ids,
                  Interval window) {
  double busy = 0;
  for (std::uint64_t id : ids)
    if (auto it = intervals.find(id); it != intervals.end() && it->second.start >= window.start &&
                                      it->second.end <= window.end)
      busy += static_cast<double>(it->second.end - it->second.start);
  return window.end > window.start ? busy / static_cast<double>(window.end - window.start) : 0;
}

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

// Median span of the regions of `ids` lying inside `window` (all of them when `window` is empty); NaN when none does.
double median_inside(const std::map<std::uint64_t, Interval>& intervals, const std::vector<std::uint64_t>& ids,
                     Interval window) {
  std::vector<double> spans;
  for (std::uint64_t id : ids)
    if (auto it = intervals.find(id); it != intervals.end())
      if (window.end == 0 || (it->second.start >= window.start && it->second.end <= window.end))
        spans.push_back(static_cast<double>(it->second.end - it->second.start));
  if (spans.empty() && window.end == 0) throw std::runtime_error("interference: no kernel was recorded");
  return spans.empty() ? std::nan("") : percentile(spans, 0.5);
}

Interval hull(const std::map<std::uint64_t, Interval>& intervals, const std::vector<std::uint64_t>& ids) {
  Interval h{~0ull, 0};
  for (std::uint64_t id : ids)
    if (auto it = intervals.find(id); it != intervals.end()) {
      h.start = std::min(h.start, it->second.start);
      h.end = std::max(h.end, it->second.end);
    }
  return h;
}



// Measures one pair on this rank. `compute` enqueues one compute kernel on its stream, `communicate` one collective.
class PairTimer {
 public:
  PairTimer(ncclComm_t world, int world_size, int repetitions)
      : world_(world), world_size_(world_size), repetitions_(repetitions) {}

  // The pair's times; the overlapped ones NaN where, on some rank, no kernel ran inside the other stream's window in
  // three attempts (every rank sees the same outcome: they retry together).
  PairTimes time(const std::function<void()>& compute, const std::function<void()>& communicate) {
    for (int i = 0; i < 2; ++i) {  // warm-up: cuBLASLt's choice, NCCL's first call
      compute();
      communicate();
    }
    timer_.collect();
    const std::vector<std::uint64_t> compute_alone = regions(repetitions_, compute);
    TWIN_CUDA_CHECK(cudaDeviceSynchronize());
    const std::vector<std::uint64_t> comm_alone = regions(repetitions_, communicate);
    const auto alone = region_intervals(timer_.collect());
    PairTimes t;
    t.compute_alone_ns = median_inside(alone, compute_alone, {});
    t.comm_alone_ns = median_inside(alone, comm_alone, {});
    for (int attempt = 0; attempt < 3; ++attempt) {
      together(t, compute, communicate);
      const double mine = std::isnan(t.compute_overlapped_ns) || std::isnan(t.comm_overlapped_ns) ? 0.0 : 1.0;
      const std::vector<double> ok = all_gather_values(world_, world_size_, mine);
      if (std::all_of(ok.begin(), ok.end(), [](double v) { return v == 1.0; })) return t;
    }
    t.compute_overlapped_ns = t.comm_overlapped_ns = std::nan("");
    return t;
  }

 private:
  // Collectives and compute kernels enqueued together, interleaved by their expected finish; the count of
  // collectives from the slowest rank's times alone, so that every rank issues the same.
  void together(PairTimes& t, const std::function<void()>& compute, const std::function<void()>& communicate) {
    const double slowest[2] = {t.compute_alone_ns, t.comm_alone_ns};
    const std::vector<double> all = all_gather_values(world_, world_size_, slowest, 2);
    double compute_ns = 0, comm_ns = 0;
    for (int r = 0; r < world_size_; ++r) {
      compute_ns = std::max(compute_ns, all[2 * r]);
      comm_ns = std::max(comm_ns, all[2 * r + 1]);
    }
    const double window_ns = repetitions_ * std::max(compute_ns, comm_ns);
    const int collectives = std::clamp(static_cast<int>(std::ceil(window_ns / comm_ns)), repetitions_, 4096);
    const int computes = static_cast<int>(std::ceil(collectives * comm_ns / t.compute_alone_ns)) + 2;
    std::vector<std::uint64_t> comm_ids, compute_ids;
    double comm_clock = 0, compute_clock = 0;  // expected finish of what each stream was given
    while (static_cast<int>(comm_ids.size()) < collectives || static_cast<int>(compute_ids.size()) < computes) {
      const bool comm_next = static_cast<int>(comm_ids.size()) < collectives &&
                             (comm_clock <= compute_clock || static_cast<int>(compute_ids.size()) >= computes);
      std::vector<std::uint64_t>& ids = comm_next ? comm_ids : compute_ids;
      timer_.begin_region(next_region_);
      ids.push_back(next_region_++);
      (comm_next ? communicate : compute)();
      timer_.end_region();
      (comm_next ? comm_clock : compute_clock) += comm_next ? comm_ns : t.compute_alone_ns;
    }
    const auto measured = region_intervals(timer_.collect());
    const Interval comm_window = hull(measured, comm_ids), compute_window = hull(measured, compute_ids);
    t.compute_overlapped_ns = median_inside(measured, compute_ids, comm_window);
    t.comm_overlapped_ns = median_inside(measured, comm_ids, compute_window);
    // How busy each stream kept its own window (a host that cannot feed a stream leaves gaps in it).
    t.comm_busy_share = busy_share(measured, comm_ids, comm_window);
    t.compute_busy_share = busy_share(measured, compute_ids, compute_window);
  }

  std::vector<std::uint64_t> regions(int count, const std::function<void()>& launch) {
    std::vector<std::uint64_t> ids;
    for (int i = 0; i < count; ++i) {
      timer_.begin_region(next_region_);
      ids.push_back(next_region_++);
      launch();
      timer_.end_region();
    }
    return ids;
  }

  ncclComm_t world_;
  int world_size_;
  int repetitions_;
  CuptiKernelTimer timer_;
  std::uint64_t next_region_ = 1;
};

struct Streams {
  cudaStream_t compute = nullptr, comm = nullptr;
  Streams() {
    TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    TWIN_CUDA_CHECK(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking));
  }
  ~Streams() {
    cudaStreamDestroy(compute);
    cudaStreamDestroy(comm);
  }
};

// Operands for square GEMMs up to `largest` (smaller ones read the buffers' prefixes).
struct GemmOperands {
  DeviceBuffer a, b, c;
  GemmOperands(std::int64_t largest, cudaStream_t stream)
      : a(2 * largest * largest), b(2 * largest * largest), c(2 * largest * largest) {
    fill_random_bf16(a.data(), largest * largest, 21, stream);
    fill_random_bf16(b.data(), largest * largest, 22, stream);
  }
};

GemmShape square(std::int64_t n) { return GemmShape{n, n, n, 1, false, false}; }

// GEMMs from a fraction of a wave to many waves (128 x 256 tiles over an H200's 132 SMs: 0.24, 0.24, 0.97, 1.94,
// 3.9, 15.5), two of them of equal FLOPs and waves apart (1024 x 1024 x 8192 and 2048^3), the first an MoE
// expert's (512 rows).
std::vector<GemmShape> interference_gemms(bool quick) {
  if (quick) return {GemmShape{512, 2048, 4096, 1, false, false}, square(2048), square(8192)};
  return {GemmShape{512, 2048, 4096, 1, false, false}, GemmShape{1024, 1024, 8192, 1, false, false}, square(2048),
          GemmShape{2048, 4096, 2048, 1, false, false}, square(4096), square(8192)};
}

}  // namespace

InterferenceMeasurement measure_interference(ncclComm_t world, bool quick) {
  InterferenceMeasurement result;
  result.gemm = square(8192);
  result.all_reduce_bytes = 256ll << 20;
  Streams streams;
  int world_size = 0;
  TWIN_NCCL_CHECK(ncclCommCount(world, &world_size));
  {
    GemmBench gemm(streams.compute);
    GemmOperands operands(8192, streams.compute);
    CollectiveBench collectives(result.all_reduce_bytes, streams.comm);
    PairTimer timer(world, world_size, quick ? 10 : 20);
    const PairTimes t = timer.time([&] { gemm.launch(result.gemm, operands.a.data(), operands.b.data(), operands.c.data()); },
                                   [&] { collectives.launch(world, OpKind::all_reduce, result.all_reduce_bytes); });
    result.gemm_alone_ns = t.compute_alone_ns;
    result.gemm_overlapped_ns = t.compute_overlapped_ns;
    result.all_reduce_alone_ns = t.comm_alone_ns;
    result.all_reduce_overlapped_ns = t.comm_overlapped_ns;
  }
  if (std::isnan(result.gemm_overlapped_ns) || std::isnan(result.all_reduce_overlapped_ns))
    throw std::runtime_error("interference: in three attempts no GEMM ran inside the all-reduces' window, or the reverse");
  result.overlap.compute_slowdown = result.gemm_overlapped_ns / result.gemm_alone_ns;
  result.overlap.communication_slowdown = result.all_reduce_overlapped_ns / result.all_reduce_alone_ns;
  return result;
}

std::vector<InterferencePairTiming> measure_interference_points(ncclComm_t world, int world_size, bool quick) {
  const std::vector<Bytes> sizes = quick ? std::vector<Bytes>{32ll << 20, 256ll << 20}
                                         : std::vector<Bytes>{4ll << 20, 32ll << 20, 256ll << 20};
  const std::vector<GemmShape> gemms = interference_gemms(quick);
  constexpr std::int64_t kAddElements = 64ll << 20;
  int device = 0, sm_count = 0;
  TWIN_CUDA_CHECK(cudaGetDevice(&device));
  TWIN_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device));
  Streams streams;
  std::vector<InterferencePairTiming> pairs;
  {
    GemmBench gemm(streams.compute);
    GemmOperands operands(8192, streams.compute);
    DeviceBuffer add_a(2 * kAddElements), add_b(2 * kAddElements), add_out(2 * kAddElements);
    fill_random_bf16(add_a.data(), kAddElements, 23, streams.compute);
    fill_random_bf16(add_b.data(), kAddElements, 24, streams.compute);
    CollectiveBench collectives(sizes.back(), streams.comm);
    PairTimer timer(world, world_size, quick ? 6 : 10);
    for (OpKind kind : kCalibratedCollectives)
      for (Bytes requested : sizes) {
        const Bytes size = collective_size_bytes(kind, requested, world_size);
        const auto communicate = [&] { collectives.launch(world, kind, size); };
        for (std::size_t g = 0; g <= gemms.size(); ++g) {
          InterferencePairTiming pair;
          pair.point.collective = kind;
          pair.point.size_bytes = size;
          PairTimes t;
          if (g < gemms.size()) {
            pair.gemm = gemms[g];
            pair.point.gemm_waves = gemm_waves(gemms[g], sm_count);
            t = timer.time([&] { gemm.launch(gemms[g], operands.a.data(), operands.b.data(), operands.c.data()); },
                           communicate);
          } else {
            pair.point.beside = InterferenceCompute::memory_bound;
            const auto* a = static_cast<const kernels::bf16*>(add_a.data());
            const auto* b = static_cast<const kernels::bf16*>(add_b.data());
            auto* out = static_cast<kernels::bf16*>(add_out.data());
            t = timer.time([&] { kernels::residual_add(a, b, out, kAddElements, streams.compute); }, communicate);
          }
          pair.times = t;
          pairs.push_back(pair);
        }
      }
  }
  // The mean over ranks of each rank's figures.
  std::vector<double> mine;
  for (const InterferencePairTiming& p : pairs) {
    const auto fields = p.times.fields();
    mine.insert(mine.end(), fields.begin(), fields.end());
  }
  const std::vector<double> all = all_gather_values(world, world_size, mine.data(), mine.size());
  constexpr std::size_t kFields = std::tuple_size_v<decltype(PairTimes{}.fields())>;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    std::array<double, kFields> mean{};
    for (int r = 0; r < world_size; ++r)
      for (std::size_t k = 0; k < kFields; ++k) mean[k] += all[r * mine.size() + kFields * i + k] / world_size;
    InterferencePairTiming& p = pairs[i];
    p.times = PairTimes::from_fields(mean);
    p.point.compute_slowdown = std::max(1.0, p.times.compute_overlapped_ns / p.times.compute_alone_ns);
    p.point.communication_slowdown = std::max(1.0, p.times.comm_overlapped_ns / p.times.comm_alone_ns);
  }
  // A pair no rank could time overlapped (NaN on some rank, so in the mean) is left out: the points around it price it.
  std::erase_if(pairs, [](const InterferencePairTiming& p) {
    return std::isnan(p.times.compute_overlapped_ns) || std::isnan(p.times.comm_overlapped_ns);
  });
  return pairs;
}

nlohmann::json interference_timings_json(const std::vector<InterferencePairTiming>& pairs) {
  nlohmann::json out = nlohmann::json::array();
  for (const InterferencePairTiming& p : pairs) {
    nlohmann::json row = interference_points_json({p.point}).at(0);
    if (p.point.beside == InterferenceCompute::gemm) row["gemm"] = gemm_key(p.gemm);
    row["compute_alone_ns"] = p.times.compute_alone_ns;
    row["compute_overlapped_ns"] = p.times.compute_overlapped_ns;
    row["communication_alone_ns"] = p.times.comm_alone_ns;
    row["communication_overlapped_ns"] = p.times.comm_overlapped_ns;
    row["compute_slowdown_raw"] = p.times.compute_overlapped_ns / p.times.compute_alone_ns;
    row["communication_slowdown_raw"] = p.times.comm_overlapped_ns / p.times.comm_alone_ns;
    row["communication_busy_share"] = p.times.comm_busy_share;
    row["compute_busy_share"] = p.times.compute_busy_share;
    out.push_back(std::move(row));
  }
  return out;
}

}  // namespace twin::gpu
