// The MLA block's time on the GPU at one DeepSeek-V3 layer's attention (hidden 7168, 128 heads, q_lora_rank 1536,
// kv_lora_rank 512, nope 128, rope 64, v 128; one sequence of 4096 tokens), printed for the record: forward and
// backward, their FLOP rate (GEMMs 2mnk; causal attention by FlashAttention's convention: half of 2 s^2 (d_qk + d_v)
// per head forward, 2.5 times that backward), and the share of the steps that are neither (the heads' expansion and
// its gradient's reduction, timed alone). Nothing is asserted about speed; the outputs must be finite.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "executor/gpu/mla_attention.hpp"
#include "tests/gpu/kernel_test_util.hpp"
#include "tests/gpu/mla_weight_elements.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;

TEST(MlaBlockSpeed, DeepSeekV3Layer) {
  REQUIRE_GPU();
  const exec::MlaShape s{1, 4096, 7168, 128, 1536, 512, 128, 64, 128, 10000.f};
  const std::int64_t t = s.tokens();
  const MlaWeightElements n = mla_weight_elements(s);
  const double scale = 1 / std::sqrt(double(s.hidden));
  gpu::DeviceBuffer x = random_bf16(t * s.hidden), d_o = random_bf16(t * s.o_width());
  gpu::DeviceBuffer w_buf[6] = {random_bf16(n.q_down, scale), random_bf16(n.q_norm), random_bf16(n.q_up, scale),
                                random_bf16(n.kv_down, scale), random_bf16(n.kv_norm), random_bf16(n.kv_up, scale)};
  const std::int64_t sizes[6] = {n.q_down, n.q_norm, n.q_up, n.kv_down, n.kv_norm, n.kv_up};
  gpu::DeviceBuffer g_buf[6];
  for (int i = 0; i < 6; ++i) g_buf[i] = poisoned(sizes[i] * 2);
  const exec::MlaWeights w{bf(w_buf[0]), bf(w_buf[1]), bf(w_buf[2]), bf(w_buf[3]), bf(w_buf[4]), bf(w_buf[5])};
  const exec::MlaGradients g{bf(g_buf[0]), bf(g_buf[1]), bf(g_buf[2]), bf(g_buf[3]), bf(g_buf[4]), bf(g_buf[5])};
  gpu::DeviceBuffer saved_buf(exec::mla_saved_bytes(s)), dx = poisoned(t * s.hidden * 2);
  gpu::DeviceBuffer o_buf = poisoned(t * s.o_width() * 2);  // the output projection's input, the caller's
  exec::MlaSaved saved = exec::mla_saved_in(saved_buf.data(), s);
  saved.o = bf(o_buf);
  gpu::Attention attention(AttentionImplementation::cudnn);
  exec::Matmul matmul;
  exec::MlaAttention block(s, attention, nullptr);
  const double forward_ms = median_ms([&] { block.forward(bf(x), w, saved, matmul, nullptr); }, 7);
  const double backward_ms = median_ms(
      [&] { block.backward(bf(x), bf(d_o), w, saved, g, false, bf(dx), false, matmul, nullptr); }, 7);
  const k::MlaHeads heads{t, s.heads, s.nope, s.rope, s.v, s.ckv_width()};
  gpu::DeviceBuffer kv = random_bf16(t * s.kv_width()), ckv = random_bf16(t * s.ckv_width());
  const double expand_ms = median_ms(
      [&] { k::mla_expand_kv(bf(kv), bf(ckv) + s.kv_lora_rank, saved.k, saved.v, heads, nullptr); }, 9);
  const double reduce_ms = median_ms(
      [&] { k::mla_reduce_kv_grad(saved.k, saved.v, bf(kv), bf(ckv) + s.kv_lora_rank, heads, nullptr); }, 9);
  const double gemm_flop = 2.0 * t * (n.q_down + n.q_up + n.kv_down + n.kv_up);
  const double attention_flop = double(s.batch) * s.heads * double(s.seq) * s.seq * (s.q_head() + s.v);
  std::printf("[kernel-speed] mla block DeepSeek-V3 layer s=%lld: forward %.3f ms %.1f TFLOP/s (expand %.3f ms), "
              "backward %.3f ms %.1f TFLOP/s (reduce %.3f ms)\n",
              (long long)s.seq, forward_ms, (gemm_flop + attention_flop) / forward_ms * 1e-9, expand_ms, backward_ms,
              (2 * gemm_flop + 2.5 * attention_flop) / backward_ms * 1e-9, reduce_ms);
  const auto o = bf16_to_host(saved.o, t * s.o_width()), d_x = bf16_to_host(dx.data(), t * s.hidden);
  EXPECT_TRUE(std::all_of(o.begin(), o.end(), [](double v) { return std::isfinite(v); }));
  EXPECT_TRUE(std::all_of(d_x.begin(), d_x.end(), [](double v) { return std::isfinite(v); }));
}

}  // namespace
}  // namespace twin::test
