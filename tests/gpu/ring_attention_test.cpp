// Context parallelism's ring attention on one GPU: every CP rank of a ring simulated in turn (the exchanges
// are host copies of the packed key-value blocks), each rank's blocks merged (forward) and its gradients summed
// (dQ per rank, dK and dV per owner of the keys), against a float64 reference of whole causal attention at the
// rank's rows, for CP 2 and 4, GQA and head_dim 64 and 128, with cuDNN's backward and its deterministic one.
#include <algorithm>
#include <cstdio>
#include <ostream>
#include <string>
#include <tuple>

#include "gpu/ring_attention.hpp"
#include "strategies/rank_layout.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"

namespace twin::test {
namespace {

namespace k = twin::kernels;
using B = k::bf16;

struct RingCase {
  int cp;
  std::int64_t batch, chunk;  // each sequence is 2 * cp chunks
  int heads, kv_heads, head_dim;
};

// How gtest (and ctest's discovered names) print a case: its fields, not its bytes (which include padding).
void PrintTo(const RingCase& c, std::ostream* out) {
  *out << "cp" << c.cp << " b" << c.batch << " chunk" << c.chunk << " h" << c.heads << " kv" << c.kv_heads << " d"
       << c.head_dim;
}

// The rows of rank r in a sequence of 2cp chunks: its load-balanced chunks (strategies/rank_layout.hpp).
std::vector<std::int64_t> rank_rows(const RingCase& c, int r) {
  std::vector<std::int64_t> rows;
  const std::int64_t seq = 2 * c.cp * c.chunk;
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t chunk : context_chunks_of(r, c.cp))
      for (std::int64_t i = 0; i < c.chunk; ++i) rows.push_back(b * seq + chunk * c.chunk + i);
  return rows;
}

std::vector<double> gather_rows(const std::vector<double>& full, const std::vector<std::int64_t>& rows,
                                std::int64_t width) {
  std::vector<double> out;
  for (std::int64_t row : rows) out.insert(out.end(), full.begin() + row * width, full.begin() + (row + 1) * width);
  return out;
}

gpu::DeviceBuffer upload_bf16(const std::vector<double>& host) {
  std::vector<B> raw(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) raw[i] = __float2bfloat16(static_cast<float>(host[i]));
  return upload(raw);
}

class RingAttention : public ::testing::TestWithParam<std::tuple<RingCase, AttentionImplementation>> {};

TEST_P(RingAttention, RanksTogetherMatchWholeCausalAttention) {
  REQUIRE_GPU();
  const auto [c, backend] = GetParam();
  gpu::Attention attention(backend);
  const std::int64_t seq = 2 * c.cp * c.chunk, tokens = c.batch * seq;
  const gpu::RingShape shape{c.batch, 2 * c.chunk, c.heads, c.kv_heads, c.head_dim,
                             (c.heads + 2 * c.kv_heads) * static_cast<std::int64_t>(c.head_dim)};
  const std::int64_t width = shape.q_row_stride, q_width = shape.q_width(), kv_width = shape.kv_width();
  const std::int64_t local = shape.tokens();
  // The whole batch's fused QKV and output gradient, rounded to bf16 as the ranks will hold them.
  const auto qkv = bf16_to_host(random_bf16(tokens * width, 2.0).data(), tokens * width);
  const auto dout = bf16_to_host(random_bf16(tokens * q_width).data(), tokens * q_width);
  const AttentionReference whole = attention_reference({c.batch, seq, c.heads, c.kv_heads, c.head_dim, true, true},
                                                       qkv, std::vector<double>(qkv.begin() + q_width, qkv.end()),
                                                       std::vector<double>(qkv.begin() + q_width + kv_width, qkv.end()),
                                                       dout, width, width);
  // Per rank: its rows of QKV and dO on the device, and its packed key-value block (what the ring carries).
  std::vector<gpu::DeviceBuffer> rank_qkv, rank_dout, rank_kv;
  for (int r = 0; r < c.cp; ++r) {
    rank_qkv.push_back(upload_bf16(gather_rows(qkv, rank_rows(c, r), width)));
    rank_dout.push_back(upload_bf16(gather_rows(dout, rank_rows(c, r), q_width)));
    rank_kv.emplace_back(gpu::ring_kv_bytes(shape));
    gpu::pack_ring_kv(shape, bf(rank_qkv[r]), width, bf(rank_kv[r]), nullptr);
  }
  std::vector<double> dkv_of_owner(static_cast<std::size_t>(c.cp * local * 2 * kv_width), 0.0);
  double worst[5] = {0, 0, 0, 0, 0};
  for (int r = 0; r < c.cp; ++r) {
    const std::vector<std::int64_t> rows = rank_rows(c, r);
    auto o_acc = poisoned(local * q_width * 4), lse = poisoned(c.batch * c.heads * shape.seq * 4);
    auto scratch_o = poisoned(local * q_width * 2), scratch_lse = poisoned(c.batch * c.heads * shape.seq * 4);
    const B* q = bf(rank_qkv[r]);
    for (int step = 0; step < c.cp; ++step) {
      const int owner = (r - step + c.cp) % c.cp;
      const gpu::RingBlock block = gpu::ring_block(r, step, c.cp);
      const B* k = step == 0 ? q + q_width : bf(rank_kv[owner]);
      const std::int64_t kv_stride = step == 0 ? width : 2 * kv_width;
      gpu::ring_forward_block(attention, block, shape, q, k, k + kv_width, kv_stride, f32(lse), bf(scratch_o),
                              f32(scratch_lse), nullptr);
      gpu::ring_merge_block(block, shape, bf(scratch_o), f32(scratch_lse), f32(o_acc), f32(lse), nullptr);
    }
    auto o = poisoned(local * q_width * 2);
    k::f32_to_bf16_rows(f32(o_acc), bf(o), local, q_width, q_width, nullptr);
    auto dq_acc = gpu::DeviceBuffer(local * q_width * 4);
    TWIN_CUDA_CHECK(cudaMemset(dq_acc.data(), 0, local * q_width * 4));
    auto scratch_dq = poisoned(local * width * 2), dkv = poisoned(gpu::ring_kv_bytes(shape));
    for (int step = 0; step < c.cp; ++step) {
      const int owner = (r - step + c.cp) % c.cp;
      gpu::ring_backward_block(attention, gpu::ring_block(r, step, c.cp), shape, q, bf(rank_kv[owner]), bf(o),
                               bf(rank_dout[r]), f32(lse), f32(dq_acc), bf(scratch_dq), bf(dkv), nullptr);
      const auto block_dkv = bf16_to_host(dkv.data(), local * 2 * kv_width);
      for (std::size_t i = 0; i < block_dkv.size(); ++i) dkv_of_owner[owner * block_dkv.size() + i] += block_dkv[i];
    }
    // The rank's rows of the whole attention's results.
    std::vector<double> ref_lse;
    for (std::int64_t b = 0; b < c.batch; ++b)
      for (int h = 0; h < c.heads; ++h)
        for (std::int64_t i = 0; i < shape.seq; ++i) {
          const std::int64_t row = rows[static_cast<std::size_t>(b * shape.seq + i)] % seq;
          ref_lse.push_back(whole.lse[(b * c.heads + h) * seq + row]);
        }
    const double errors[3] = {relative_error(bf16_to_host(o.data(), local * q_width), gather_rows(whole.o, rows, q_width)),
                              relative_error(f32_to_host(lse.data(), ref_lse.size()), ref_lse),
                              relative_error(f32_to_host(dq_acc.data(), local * q_width), gather_rows(whole.dq, rows, q_width))};
    for (int e = 0; e < 3; ++e) worst[e] = std::max(worst[e], errors[e]);
  }
  for (int r = 0; r < c.cp; ++r) {
    const std::vector<std::int64_t> rows = rank_rows(c, r);
    const auto ref_dk = gather_rows(whole.dk, rows, kv_width), ref_dv = gather_rows(whole.dv, rows, kv_width);
    std::vector<double> got_dk, got_dv;
    for (std::int64_t t = 0; t < local; ++t) {
      const double* row = dkv_of_owner.data() + (r * local + t) * 2 * kv_width;
      got_dk.insert(got_dk.end(), row, row + kv_width);
      got_dv.insert(got_dv.end(), row + kv_width, row + 2 * kv_width);
    }
    worst[3] = std::max(worst[3], relative_error(got_dk, ref_dk));
    worst[4] = std::max(worst[4], relative_error(got_dv, ref_dv));
  }
  std::printf("[kernel-error] ring attention %s cp=%d b=%lld chunk=%lld h=%d kvh=%d d=%d: O %.2e lse %.2e dQ %.2e "
              "dK %.2e dV %.2e\n", to_string(backend), c.cp, (long long)c.batch, (long long)c.chunk, c.heads,
              c.kv_heads, c.head_dim, worst[0], worst[1], worst[2], worst[3], worst[4]);
  EXPECT_LT(worst[0], kBf16Tolerance);
  EXPECT_LT(worst[1], 1e-5);
  EXPECT_LT(worst[2], kBf16Tolerance);
  EXPECT_LT(worst[3], kBf16Tolerance);
  EXPECT_LT(worst[4], kBf16Tolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RingAttention,
                         ::testing::Combine(::testing::Values(RingCase{2, 1, 64, 4, 2, 64}, RingCase{2, 2, 128, 4, 4, 128},
                                                              RingCase{4, 1, 64, 8, 2, 128}, RingCase{4, 2, 32, 4, 1, 64}),
                                            ::testing::Values(AttentionImplementation::cudnn,
                                                              AttentionImplementation::cudnn_deterministic)),
                         [](const ::testing::TestParamInfo<std::tuple<RingCase, AttentionImplementation>>& info) {
                           // A readable name (gtest would print the case's bytes, its padding among them).
                           const RingCase& c = std::get<0>(info.param);
                           std::string backend = to_string(std::get<1>(info.param));
                           std::replace(backend.begin(), backend.end(), '-', '_');
                           return "cp" + std::to_string(c.cp) + "_b" + std::to_string(c.batch) + "_chunk" +
                                  std::to_string(c.chunk) + "_h" + std::to_string(c.heads) + "_kv" +
                                  std::to_string(c.kv_heads) + "_d" + std::to_string(c.head_dim) + "_" + backend;
                         });

// The kernels backend runs whole self-attention only: a ring block is refused, not run wrong.
TEST(RingAttention, KernelsBackendRefusesARingBlock) {
  REQUIRE_GPU();
  gpu::Attention attention(AttentionImplementation::kernels);
  const gpu::RingShape shape{1, 128, 4, 2, 64, 8 * 64};
  auto qkv = random_bf16(shape.tokens() * shape.q_row_stride);
  auto lse = poisoned(4 * 128 * 4), scratch_o = poisoned(shape.tokens() * shape.q_width() * 2),
       scratch_lse = poisoned(4 * 128 * 4);
  const B* q = bf(qkv);
  EXPECT_THROW(gpu::ring_forward_block(attention, gpu::RingBlock::first_half_keys, shape, q, q + 256, q + 384,
                                       shape.q_row_stride, f32(lse), bf(scratch_o), f32(scratch_lse), nullptr),
               std::invalid_argument);
}

}  // namespace
}  // namespace twin::test
