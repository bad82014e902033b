// The kernels of FP8 under sequence parallelism (executor/gpu/fp8_gathers.cpp), against the host quantization of
// the whole tensor (tests/gpu/fp8_test_util.hpp, the float64 reference the one-call cast is held to): two shards of
// rows, each cast after its amax maxima were reduced (max) with the other's, as the NCCL all-reduce over TP reduces
// them, give together every byte and the scale of the whole tensor's cast; the byte transpose that makes a gathered
// tensor's columnwise copy (the fp8_transpose op's entry, gpu::Fp8Transpose) is the host's transpose.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "gpu/op_kernels.hpp"
#include "tests/gpu/fp8_test_util.hpp"

namespace twin::test {
namespace {

using kernels::Fp8Type;

TEST(Fp8SequenceParallelCast, ShardsScaledByTheReducedAmaxAreTheWholeTensorsCast) {
  REQUIRE_GPU();
  const std::int64_t shard_rows = 128, cols = 328, shards = 2;
  for (const Fp8Type type : {Fp8Type::e4m3, Fp8Type::e5m2}) {
    auto x = random_bf16(shards * shard_rows * cols, 3.0);
    const std::vector<double> whole = bf16_to_host(x.data(), shards * shard_rows * cols);
    std::vector<gpu::DeviceBuffer> records;
    for (int s = 0; s < shards; ++s) {
      records.push_back(poisoned(kernels::kFp8ScalingFloats * sizeof(float)));
      kernels::fp8_amax_partials(bf(x) + s * shard_rows * cols, shard_rows, cols, f32(records[s]), nullptr);
    }
    // The all-reduce (max) over the shards' maxima, element by element.
    const int count = kernels::fp8_amax_partial_count(shard_rows * cols);
    std::vector<float> reduced(count, 0.0f);
    for (const gpu::DeviceBuffer& record : records) {
      const std::vector<double> maxima = f32_to_host(f32(record) + kernels::kFp8PartialsAt, count);
      for (int i = 0; i < count; ++i) reduced[i] = std::max(reduced[i], static_cast<float>(maxima[i]));
    }
    std::vector<std::uint8_t> bytes;
    auto rowwise = poisoned(shard_rows * cols);
    for (int s = 0; s < shards; ++s) {
      TWIN_CUDA_CHECK(cudaMemcpy(f32(records[s]) + kernels::kFp8PartialsAt, reduced.data(), count * sizeof(float),
                                 cudaMemcpyHostToDevice));
      gpu::Fp8Cast cast{bf(x) + s * shard_rows * cols, shard_rows, cols, type,
                        static_cast<std::uint8_t*>(rowwise.data()), nullptr, f32(records[s])};
      cast.amax_reduced = true;
      gpu::launch(cast, nullptr);
      const std::vector<std::uint8_t> shard = bytes_to_host(rowwise, shard_rows * cols);
      bytes.insert(bytes.end(), shard.begin(), shard.end());
      const HostFp8 ref = quantize_on_host(whole, type);
      const std::vector<double> record = f32_to_host(records[s].data(), 2);
      EXPECT_EQ(record[0], ref.scale_inv) << "shard " << s;
      EXPECT_EQ(record[1], ref.amax) << "shard " << s;
    }
    EXPECT_EQ(bytes, quantize_on_host(whole, type).bytes);
  }
}

TEST(Fp8SequenceParallelCast, TransposeOfGatheredRowsIsTheHostsTranspose) {
  REQUIRE_GPU();
  for (const auto [rows, cols] : {std::pair<std::int64_t, std::int64_t>{200, 328}, {4096, 512}, {64, 1}}) {
    std::vector<std::uint8_t> host(rows * cols);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<std::uint8_t>((i * 2654435761u) >> 13);
    gpu::DeviceBuffer in(host.size()), out(host.size());
    TWIN_CUDA_CHECK(cudaMemcpy(in.data(), host.data(), host.size(), cudaMemcpyHostToDevice));
    // Through the fp8_transpose kind's one entry, which the executor's action and calibration's bench launch.
    gpu::launch(gpu::Fp8Transpose{static_cast<const std::uint8_t*>(in.data()), rows, cols,
                                  static_cast<std::uint8_t*>(out.data())},
                nullptr);
    TWIN_CUDA_CHECK(cudaDeviceSynchronize());
    EXPECT_EQ(bytes_to_host(out, host.size()), transposed(host, rows, cols)) << rows << " x " << cols;
  }
}

}  // namespace
}  // namespace twin::test
