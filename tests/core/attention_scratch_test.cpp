// The attention backward's scratch by implementation (core/attention_scratch.hpp) against what gpu::Attention
// allocated on one H200 (tests/gpu/attention_workspace_test.cpp, 2026-12-04 15:49 UTC; each measured figure is the
// counted one plus cuDNN's 256-byte alignment of its pieces).
#include <gtest/gtest.h>

#include "core/attention_scratch.hpp"

namespace twin {
namespace {

AttentionShape shape(std::int64_t batch, std::int64_t seq, int heads, int kv_heads, int head_dim) {
  AttentionShape a;
  a.batch = batch;
  a.seq_q = a.seq_kv = seq;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_dim = head_dim;
  return a;
}

TEST(AttentionScratch, IsWhatEachEngineAllocatedOnAnH200) {
  struct Measured {
    AttentionShape a;
    std::int64_t cudnn, deterministic;
  };
  const Measured measured[] = {{shape(1, 1024, 8, 8, 128), 4227328, 16810240},
                               {shape(1, 4096, 8, 8, 128), 16908544, 268566784},
                               {shape(2, 4096, 32, 32, 128), 135266560, 2148532480},
                               {shape(1, 4096, 8, 2, 128), 33685760, 285344000},
                               {shape(1, 4096, 8, 8, 64), 8519936, 268566784},
                               {shape(1, 8192, 8, 8, 128), 33816832, 1074004224}};
  for (const Measured& m : measured) {
    using enum AttentionImplementation;
    const std::int64_t default_bytes = attention_backward_scratch_bytes(cudnn, m.a);
    const std::int64_t deterministic = attention_backward_scratch_bytes(cudnn_deterministic, m.a);
    EXPECT_LE(default_bytes, m.cudnn);
    EXPECT_GE(default_bytes, m.cudnn - 1024);
    EXPECT_LE(deterministic, m.deterministic);
    EXPECT_GE(deterministic, m.deterministic - 1024);
    EXPECT_EQ(attention_backward_scratch_bytes(kernels, m.a), m.a.batch * m.a.heads * m.a.seq_q * 4);
  }
}

}  // namespace
}  // namespace twin
