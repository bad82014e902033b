// The scratch each attention backward allocates (gpu::Attention::backward_scratch_bytes) against what the memory
// side counts for it (core/attention_scratch.hpp), shape by shape, for cuDNN's default and deterministic engines and
// twin's kernels: within cuDNN's 256-byte alignment of each piece. Each measurement is printed (bytes and bytes per
// score), the table core/attention_scratch.hpp was written from.
#include <cstdio>

#include "core/attention_scratch.hpp"
#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

TEST(AttentionWorkspace, EachEnginesBackwardScratchIsWhatTheMemorySideCounts) {
  REQUIRE_GPU();
  struct Shape {
    std::int64_t batch, seq;
    int heads, kv_heads, head_dim;
    bool causal;
  };
  const Shape shapes[] = {{1, 1024, 8, 8, 128, true},  {1, 2048, 8, 8, 128, true},  {1, 4096, 8, 8, 128, true},
                          {2, 4096, 8, 8, 128, true},  {1, 4096, 16, 16, 128, true}, {1, 4096, 8, 2, 128, true},
                          {1, 4096, 8, 8, 64, true},   {1, 4096, 8, 8, 128, false}, {2, 4096, 32, 32, 128, true},
                          {1, 8192, 8, 8, 128, true},  {1, 2048, 16, 4, 64, true}};
  constexpr std::int64_t kAlignmentSlack = 4 * 256;  // each of the scratch's pieces rounded up to 256 bytes
  for (AttentionImplementation backend : {AttentionImplementation::cudnn, AttentionImplementation::cudnn_deterministic,
                                          AttentionImplementation::kernels}) {
    gpu::Attention attention(backend);
    for (const Shape& x : shapes) {
      const kernels::AttentionDims dims{.batch = x.batch, .seq = x.seq, .heads = x.heads, .kv_heads = x.kv_heads,
                                        .head_dim = x.head_dim, .causal = x.causal};
      const AttentionShape op{.batch = x.batch, .heads = x.heads, .kv_heads = x.kv_heads, .seq_q = x.seq,
                              .seq_kv = x.seq, .head_dim = x.head_dim, .causal = x.causal};
      const std::int64_t bytes = attention.backward_scratch_bytes(dims);
      const std::int64_t counted = attention_backward_scratch_bytes(backend, op);
      std::printf("[attention-workspace] %s b=%lld s=%lld h=%d kvh=%d d=%d causal=%d: %lld bytes (counted %lld), "
                  "%.4f per score\n",
                  to_string(backend), static_cast<long long>(x.batch), static_cast<long long>(x.seq), x.heads,
                  x.kv_heads, x.head_dim, int(x.causal), static_cast<long long>(bytes),
                  static_cast<long long>(counted), bytes / (double(x.batch) * x.heads * x.seq * x.seq));
      EXPECT_GE(bytes, counted) << to_string(backend);
      EXPECT_LE(bytes, counted + kAlignmentSlack) << to_string(backend);
    }
  }
}

}  // namespace
}  // namespace twin::test
