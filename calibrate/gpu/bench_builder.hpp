// What the kernel benches of calibrate/gpu/kernel_benches.cpp and attention_bench.cpp share: a Builder that makes a
// bench's device buffers (random data, never zeros) and bench_of, which makes its run the op kind's entry
// (gpu/op_kernels.hpp), the one the executor launches.
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/gpu/kernel_benches.hpp"
#include "core/op.hpp"
#include "gpu/checks.hpp"

namespace twin::gpu {

struct Builder {
  KernelBench bench;
  std::uint64_t seed;
  cudaStream_t stream;
  std::size_t bf16(std::int64_t count) {
    bench.buffers.emplace_back(static_cast<std::size_t>(count) * 2);
    fill_random_bf16(bench.buffers.back().data(), count, seed++, stream);
    return bench.buffers.size() - 1;
  }
  std::size_t f32(std::int64_t count) {
    bench.buffers.emplace_back(static_cast<std::size_t>(count) * 4);
    fill_random_f32(bench.buffers.back().data(), count, seed++, stream);
    return bench.buffers.size() - 1;
  }
  // Indices uniform in [0, bound), made on the host (splitmix-like, deterministic in the seed).
  std::size_t indices(std::int64_t count, std::int64_t bound) {
    std::vector<std::int32_t> host(count);
    std::uint64_t z = seed++;
    for (auto& v : host) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<std::int32_t>((z >> 33) % static_cast<std::uint64_t>(bound));
    }
    return upload(host);
  }
  // A permutation of [0, count) (a Fisher-Yates shuffle on the same generator): routed rows in expert order.
  std::size_t permutation(std::int64_t count) {
    std::vector<std::int32_t> host(count);
    std::iota(host.begin(), host.end(), 0);
    std::uint64_t z = seed++;
    for (std::int64_t i = count - 1; i > 0; --i) {
      z = z * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(host[i], host[(z >> 33) % static_cast<std::uint64_t>(i + 1)]);
    }
    return upload(host);
  }
  std::size_t raw(std::size_t bytes) {
    bench.buffers.emplace_back(std::max<std::size_t>(bytes, 1));
    return bench.buffers.size() - 1;
  }
  kernels::bf16* b(std::size_t i) { return static_cast<kernels::bf16*>(bench.buffers[i].data()); }
  float* f(std::size_t i) { return static_cast<float*>(bench.buffers[i].data()); }
  std::int32_t* idx(std::size_t i) { return static_cast<std::int32_t*>(bench.buffers[i].data()); }
  void* v(std::size_t i) { return bench.buffers[i].data(); }

 private:
  std::size_t upload(const std::vector<std::int32_t>& host) {
    bench.buffers.emplace_back(host.size() * 4);
    TWIN_CUDA_CHECK(cudaMemcpy(bench.buffers.back().data(), host.data(), host.size() * 4, cudaMemcpyHostToDevice));
    return bench.buffers.size() - 1;
  }
};

// The bench runs the op kind's entry; `keep` holds what the call points into beside the buffers (the shared
// attention).
template <class Call>
KernelBench bench_of(Builder& x, const Call& call, std::shared_ptr<void> keep = nullptr) {
  x.bench.run = [call, keep](cudaStream_t s) { launch(call, s); };
  return std::move(x.bench);
}

// An attention op's bench (calibrate/gpu/attention_bench.cpp): fused through the executor's default implementation,
// or unfused as Megatron-LM's kernels (AttentionShape::flash false).
std::optional<KernelBench> attention_bench(Builder& x, const Op& op, const KernelModelFacts& facts,
                                           std::string& why_not);

}  // namespace twin::gpu
