// The whole multi-latent attention block (executor/gpu/mla_attention.hpp), forward and backward, against a float64
// CPU reference written from DeepSeek-V3's equations (down projections, latent RMSNorms, up projections, RoPE on the
// rope parts with the key shared by all heads, attention with d_qk = nope + rope and d_v, and each step's
// gradient), itself checked against finite differences: with and without the query latent; every weight's gradient
// and the input's, stored, then the same backward again adding to them (twice the first).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "executor/gpu/mla_attention.hpp"
#include "tests/gpu/attention_reference.hpp"
#include "tests/gpu/kernel_test_util.hpp"
#include "tests/gpu/mla_weight_elements.hpp"

namespace twin::test {
namespace {

using Host = std::vector<double>;
using exec::MlaShape;

// c[m, n] = a[m, k] b[k, n], with a or b read transposed (stored [k, m], [n, k]).
Host matmul(const Host& a, const Host& b, std::int64_t m, std::int64_t n, std::int64_t k, bool ta = false,
            bool tb = false) {
  Host c(m * n, 0.0);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t l = 0; l < k; ++l) {
      const double x = ta ? a[l * m + i] : a[i * k + l];
      for (std::int64_t j = 0; j < n; ++j) c[i * n + j] += x * (tb ? b[j * k + l] : b[l * n + j]);
    }
  return c;
}

constexpr double kEps = 1e-5;  // the norm entry's

Host rmsnorm(const Host& x, const Host& g, std::int64_t rows, std::int64_t cols) {
  Host y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += x[r * cols + c] * x[r * cols + c];
    const double rs = 1 / std::sqrt(ss / cols + kEps);
    for (std::int64_t c = 0; c < cols; ++c) y[r * cols + c] = x[r * cols + c] * rs * g[c];
  }
  return y;
}

// dx of y = x rs g, and g's gradient added into dg.
Host rmsnorm_backward(const Host& dy, const Host& x, const Host& g, std::int64_t rows, std::int64_t cols, Host& dg) {
  Host dx(x.size());
  dg.assign(cols, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    double ss = 0, dot = 0;
    for (std::int64_t c = 0; c < cols; ++c) ss += x[r * cols + c] * x[r * cols + c];
    const double rs = 1 / std::sqrt(ss / cols + kEps);
    for (std::int64_t c = 0; c < cols; ++c) dot += dy[r * cols + c] * g[c] * x[r * cols + c];
    for (std::int64_t c = 0; c < cols; ++c) {
      dx[r * cols + c] = rs * dy[r * cols + c] * g[c] - x[r * cols + c] * rs * rs * rs * dot / cols;
      dg[c] += dy[r * cols + c] * x[r * cols + c] * rs;
    }
  }
  return dx;
}

// Rotate-half RoPE (sign +1) or its transpose (-1) of `width` elements at `at` of each row (row_stride apart) of
// token t, position t % seq, angle position x theta^(-2i / width).
void rope(Host& x, std::int64_t tokens, std::int64_t seq, std::int64_t row_stride, std::int64_t at, int width,
          int count, std::int64_t every, double theta, double sign) {
  const int half = width / 2;
  for (std::int64_t t = 0; t < tokens; ++t)
    for (int h = 0; h < count; ++h)
      for (int i = 0; i < half; ++i) {
        const double angle = double(t % seq) * std::pow(theta, -2.0 * i / width);
        const double cs = std::cos(angle), sn = sign * std::sin(angle);
        double& x1 = x[t * row_stride + h * every + at + i];
        double& x2 = x[t * row_stride + h * every + at + i + half];
        const double a = x1, b = x2;
        x1 = a * cs - b * sn;
        x2 = b * cs + a * sn;
      }
}

struct Weights {
  Host q_down, q_norm, q_up, kv_down, kv_norm, kv_up;
};
struct Result {
  Host o, dx;
  Weights grads;
};

Result reference(const MlaShape& s, const Host& x, const Weights& w, const Host& d_o) {
  const std::int64_t t = s.tokens(), h = s.hidden, qr = s.q_lora_rank, kvr = s.kv_lora_rank, dqk = s.q_head();
  Result r;
  Host cq, cqn, q;
  if (qr > 0) {
    cq = matmul(x, w.q_down, t, qr, h);
    cqn = rmsnorm(cq, w.q_norm, t, qr);
    q = matmul(cqn, w.q_up, t, s.q_width(), qr);
  } else {
    q = matmul(x, w.q_up, t, s.q_width(), h);
  }
  Host ckv_full = matmul(x, w.kv_down, t, s.ckv_width(), h), ckv(t * kvr);
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t c = 0; c < kvr; ++c) ckv[i * kvr + c] = ckv_full[i * s.ckv_width() + c];
  const Host ckvn = rmsnorm(ckv, w.kv_norm, t, kvr), kv = matmul(ckvn, w.kv_up, t, s.kv_width(), kvr);
  rope(q, t, s.seq, s.q_width(), s.nope, s.rope, s.heads, dqk, s.rope_theta, 1);
  rope(ckv_full, t, s.seq, s.ckv_width(), kvr, s.rope, 1, 0, s.rope_theta, 1);
  Host key(t * s.q_width()), value(t * s.o_width());
  for (std::int64_t i = 0; i < t; ++i)
    for (int hd = 0; hd < s.heads; ++hd) {
      const std::int64_t row = i * s.heads + hd;
      for (int c = 0; c < s.nope; ++c) key[row * dqk + c] = kv[row * (s.nope + s.v) + c];
      for (int c = 0; c < s.rope; ++c) key[row * dqk + s.nope + c] = ckv_full[i * s.ckv_width() + kvr + c];
      for (int c = 0; c < s.v; ++c) value[row * s.v + c] = kv[row * (s.nope + s.v) + s.nope + c];
    }
  const AttentionCase c{s.batch, s.seq, s.heads, s.heads, s.q_head(), true, false, s.v};
  const AttentionReference a = attention_reference(c, q, key, value, d_o, s.q_width(), s.q_width(), s.o_width());
  r.o = a.o;
  // Backward: the heads folded back, RoPE undone, then each projection and norm in reverse.
  Host dq = a.dq, d_kv(t * s.kv_width()), d_ckv_full(t * s.ckv_width(), 0.0);
  for (std::int64_t i = 0; i < t; ++i)
    for (int hd = 0; hd < s.heads; ++hd) {
      const std::int64_t row = i * s.heads + hd;
      for (int c = 0; c < s.nope; ++c) d_kv[row * (s.nope + s.v) + c] = a.dk[row * dqk + c];
      for (int c = 0; c < s.v; ++c) d_kv[row * (s.nope + s.v) + s.nope + c] = a.dv[row * s.v + c];
      for (int c = 0; c < s.rope; ++c) d_ckv_full[i * s.ckv_width() + kvr + c] += a.dk[row * dqk + s.nope + c];
    }
  rope(dq, t, s.seq, s.q_width(), s.nope, s.rope, s.heads, dqk, s.rope_theta, -1);
  rope(d_ckv_full, t, s.seq, s.ckv_width(), kvr, s.rope, 1, 0, s.rope_theta, -1);
  r.grads.kv_up = matmul(ckvn, d_kv, kvr, s.kv_width(), t, true);
  const Host d_ckv = rmsnorm_backward(matmul(d_kv, w.kv_up, t, kvr, s.kv_width(), false, true), ckv, w.kv_norm, t,
                                      kvr, r.grads.kv_norm);
  for (std::int64_t i = 0; i < t; ++i)
    for (std::int64_t col = 0; col < kvr; ++col) d_ckv_full[i * s.ckv_width() + col] = d_ckv[i * kvr + col];
  r.grads.kv_down = matmul(x, d_ckv_full, h, s.ckv_width(), t, true);
  r.dx = matmul(d_ckv_full, w.kv_down, t, h, s.ckv_width(), false, true);
  Host dx_q;
  if (qr > 0) {
    r.grads.q_up = matmul(cqn, dq, qr, s.q_width(), t, true);
    const Host d_cq =
        rmsnorm_backward(matmul(dq, w.q_up, t, qr, s.q_width(), false, true), cq, w.q_norm, t, qr, r.grads.q_norm);
    r.grads.q_down = matmul(x, d_cq, h, qr, t, true);
    dx_q = matmul(d_cq, w.q_down, t, h, qr, false, true);
  } else {
    r.grads.q_up = matmul(x, dq, h, s.q_width(), t, true);
    dx_q = matmul(dq, w.q_up, t, h, s.q_width(), false, true);
  }
  for (std::size_t i = 0; i < r.dx.size(); ++i) r.dx[i] += dx_q[i];
  return r;
}

Host doubled(const Host& x) {
  Host y(x);
  for (double& v : y) v *= 2;
  return y;
}

// The reference itself: its gradients are those of L = sum(o * d_o) by central differences, for every input and
// weight (a sample of each), with and without the query latent. No GPU.
TEST(MlaBlockReference, GradientsAreTheLossesFiniteDifferences) {
  for (const MlaShape& s : {MlaShape{2, 5, 12, 2, 10, 8, 6, 4, 6, 10000.f}, MlaShape{1, 6, 10, 3, 0, 6, 4, 2, 4, 500.f}}) {
    std::uint64_t state = 12345;
    const auto random = [&](std::int64_t count) {  // uniform in [-1, 1), a fixed sequence
      Host v(count);
      for (double& x : v) x = double((state = state * 6364136223846793005ull + 1442695040888963407ull) >> 11) / 0x1p52 - 1;
      return v;
    };
    const MlaWeightElements n = mla_weight_elements(s);
    Weights w{random(n.q_down), random(n.q_norm), random(n.q_up), random(n.kv_down), random(n.kv_norm), random(n.kv_up)};
    const Host x = random(s.tokens() * s.hidden), d_o = random(s.tokens() * s.o_width());
    const Result r = reference(s, x, w, d_o);
    const auto loss = [&](const Host& at_x, const Weights& at_w) {
      const Host o = reference(s, at_x, at_w, d_o).o;
      double sum = 0;
      for (std::size_t i = 0; i < o.size(); ++i) sum += o[i] * d_o[i];
      return sum;
    };
    constexpr double kStep = 1e-6;
    const auto check = [&](Host& value, const Host& gradient, const std::function<double()>& at) {
      for (std::size_t i = 0; i < value.size(); i += 3) {
        const double kept = value[i];
        value[i] = kept + kStep;
        const double up = at();
        value[i] = kept - kStep;
        const double down = at();
        value[i] = kept;
        EXPECT_NEAR(gradient[i], (up - down) / (2 * kStep), 1e-5 * (1 + std::abs(gradient[i])));
      }
    };
    Host x_moved = x;
    check(x_moved, r.dx, [&] { return loss(x_moved, w); });
    Host Weights::*members[6] = {&Weights::q_down, &Weights::q_norm, &Weights::q_up,
                                 &Weights::kv_down, &Weights::kv_norm, &Weights::kv_up};
    for (Host Weights::*m : members) check(w.*m, r.grads.*m, [&] { return loss(x, w); });
  }
}

class MlaBlock : public ::testing::TestWithParam<MlaShape> {};

TEST_P(MlaBlock, ForwardAndBackwardMatchFloat64) {
  REQUIRE_GPU();
  const MlaShape s = GetParam();
  const std::int64_t t = s.tokens();
  const MlaWeightElements n = mla_weight_elements(s);
  const auto fan_in = [](std::int64_t in) { return 2.0 / std::sqrt(double(in)); };
  gpu::DeviceBuffer x = random_bf16(t * s.hidden), d_o = random_bf16(t * s.o_width());
  gpu::DeviceBuffer w_buf[6] = {random_bf16(std::max<std::int64_t>(n.q_down, 1), fan_in(s.hidden)),
                                random_bf16(std::max<std::int64_t>(n.q_norm, 1)),
                                random_bf16(n.q_up, fan_in(s.q_lora_rank ? s.q_lora_rank : s.hidden)),
                                random_bf16(n.kv_down, fan_in(s.hidden)), random_bf16(n.kv_norm),
                                random_bf16(n.kv_up, fan_in(s.kv_lora_rank))};
  const std::int64_t sizes[6] = {n.q_down, n.q_norm, n.q_up, n.kv_down, n.kv_norm, n.kv_up};
  gpu::DeviceBuffer g_buf[6];
  for (int i = 0; i < 6; ++i) g_buf[i] = poisoned(std::max<std::int64_t>(sizes[i], 1) * 2);
  const exec::MlaWeights w{bf(w_buf[0]), bf(w_buf[1]), bf(w_buf[2]), bf(w_buf[3]), bf(w_buf[4]), bf(w_buf[5])};
  const exec::MlaGradients g{bf(g_buf[0]), bf(g_buf[1]), bf(g_buf[2]), bf(g_buf[3]), bf(g_buf[4]), bf(g_buf[5])};
  gpu::DeviceBuffer saved_buf = poisoned(exec::mla_saved_bytes(s)), dx = poisoned(t * s.hidden * 2);
  gpu::DeviceBuffer o_buf = poisoned(t * s.o_width() * 2);  // the output projection's input, the caller's
  exec::MlaSaved saved = exec::mla_saved_in(saved_buf.data(), s);
  saved.o = bf(o_buf);

  gpu::Attention attention(AttentionImplementation::cudnn_deterministic);
  exec::Matmul matmul;
  exec::MlaAttention block(s, attention, nullptr);
  block.forward(bf(x), w, saved, matmul, nullptr);
  block.backward(bf(x), bf(d_o), w, saved, g, false, bf(dx), false, matmul, nullptr);

  Weights hw;
  Host* host_w[6] = {&hw.q_down, &hw.q_norm, &hw.q_up, &hw.kv_down, &hw.kv_norm, &hw.kv_up};
  for (int i = 0; i < 6; ++i) *host_w[i] = bf16_to_host(w_buf[i].data(), sizes[i]);
  Result r = reference(s, bf16_to_host(x.data(), t * s.hidden), hw, bf16_to_host(d_o.data(), t * s.o_width()));
  const Host* want[6] = {&r.grads.q_down, &r.grads.q_norm, &r.grads.q_up,
                         &r.grads.kv_down, &r.grads.kv_norm, &r.grads.kv_up};
  const char* names[6] = {"q_down", "q_norm", "q_up", "kv_down", "kv_norm", "kv_up"};
  EXPECT_LT(report("mla block o", relative_error(bf16_to_host(saved.o, t * s.o_width()), r.o)), kBf16Tolerance);
  EXPECT_LT(report("mla block dx", relative_error(bf16_to_host(dx.data(), t * s.hidden), r.dx)), kBf16Tolerance);
  Host first[6];
  for (int i = 0; i < 6; ++i) {
    if (sizes[i] == 0) continue;
    first[i] = bf16_to_host(g_buf[i].data(), sizes[i]);
    const std::string what = std::string("mla block d") + names[i];
    EXPECT_LT(report(what.c_str(), relative_error(first[i], *want[i])), kBf16Tolerance) << names[i];
  }
  // The same backward again, adding to the gradients and to dx: twice the first.
  const Host dx_first = bf16_to_host(dx.data(), t * s.hidden);
  block.backward(bf(x), bf(d_o), w, saved, g, true, bf(dx), true, matmul, nullptr);
  EXPECT_LT(relative_error(bf16_to_host(dx.data(), t * s.hidden), doubled(dx_first)), kBf16Tolerance);
  for (int i = 0; i < 6; ++i) {
    if (sizes[i] == 0) continue;
    EXPECT_LT(relative_error(bf16_to_host(g_buf[i].data(), sizes[i]), doubled(first[i])), kBf16Tolerance) << names[i];
  }
}

// With the query latent (DeepSeek-V3) and without (V2-Lite's direct query projection); 33 positions (not a tile's
// multiple); the rope part 32 wide (RoPE's 8-wide vector path) and 8 (its scalar path).
INSTANTIATE_TEST_SUITE_P(Shapes, MlaBlock,
                         ::testing::Values(MlaShape{2, 33, 128, 4, 96, 64, 64, 32, 64, 10000.f},
                                           MlaShape{1, 40, 96, 2, 0, 48, 56, 8, 32, 50000.f}));

}  // namespace
}  // namespace twin::test
