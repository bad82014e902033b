// A float64 CPU reference of attention (the full score matrix) for the GPU tests of attention and of
// context parallelism's ring.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace twin::test {

struct AttentionCase {
  std::int64_t batch, seq;
  int heads, kv_heads, head_dim;
  bool causal, fused_qkv;
  int v_head_dim = 0;  // 0: head_dim (MLA's values are narrower than its queries and keys)
  std::int64_t window = 0;  // causal only: each query sees itself and the window - 1 keys before it; 0: all before
  double softcap = 0;       // > 0: each scaled score becomes softcap x tanh(score / softcap) before the softmax
};

struct AttentionReference {
  std::vector<double> o, lse, dq, dk, dv;
  // With sinks only, [heads]: their gradient, and the sum of its terms' magnitudes (the scale its rounding errors
  // take: the terms cancel, so the gradient itself can be far smaller).
  std::vector<double> dsinks, dsinks_magnitude;
};

// Attention dropout as the kernel drew it: keep[((b * heads + h) * seq + i) * seq + j] is 1 where probability
// (i, j) of sequence b, head h was kept, each kept one scaled by 1 / (1 - probability).
struct DropoutMask {
  std::vector<std::uint8_t> keep;
  double probability = 0;
};

// qh: [tokens, heads*D] (row stride q_stride), kh: [tokens, kv*D] (kv_stride), vh: [tokens, kv*Dv] (v_stride, 0:
// kv_stride); outputs contiguous (o, dO and dv Dv wide). `sinks` [heads] (gpt-oss's): each head's logit joins every
// row's softmax as a key with no value.
inline AttentionReference attention_reference(const AttentionCase& c, const std::vector<double>& qh, const std::vector<double>& kh,
                    const std::vector<double>& vh, const std::vector<double>& doh, std::int64_t q_stride,
                    std::int64_t kv_stride, std::int64_t v_stride = 0, const DropoutMask* dropout = nullptr,
                    const std::vector<double>* sinks = nullptr) {
  const int D = c.head_dim, Dv = c.v_head_dim ? c.v_head_dim : D, group = c.heads / c.kv_heads;
  if (v_stride == 0) v_stride = kv_stride;
  const std::int64_t S = c.seq, tokens = c.batch * S;
  AttentionReference r;
  r.o.assign(tokens * c.heads * Dv, 0);
  r.dq.assign(tokens * c.heads * D, 0);
  r.dk.assign(tokens * c.kv_heads * D, 0);
  r.dv.assign(tokens * c.kv_heads * Dv, 0);
  r.lse.assign(c.batch * c.heads * S, 0);
  if (sinks) r.dsinks.assign(c.heads, 0), r.dsinks_magnitude.assign(c.heads, 0);
  const double scale = 1 / std::sqrt(double(D));
  // used: p as it multiplies V (dropped and scaled); slope: d(capped score) / d(scaled score), 1 - tanh^2 (1 uncapped)
  std::vector<double> p(S * S), dp(S * S), used(S * S), slope(S * S, 1.0);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads; ++h) {
      const int g = h / group;
      auto Q = [&](std::int64_t i, int d) { return qh[(b * S + i) * q_stride + h * D + d]; };
      auto K = [&](std::int64_t j, int d) { return kh[(b * S + j) * kv_stride + g * D + d]; };
      auto V = [&](std::int64_t j, int d) { return vh[(b * S + j) * v_stride + g * Dv + d]; };
      auto dO = [&](std::int64_t i, int d) { return doh[((b * S + i) * c.heads + h) * Dv + d]; };
      // 1 / (1 - p) where (i, j) is kept, 0 where dropped; 1 without dropout.
      auto kept = [&](std::int64_t i, std::int64_t j) {
        if (!dropout) return 1.0;
        return dropout->keep[((b * c.heads + h) * S + i) * S + j] ? 1 / (1 - dropout->probability) : 0.0;
      };
      for (std::int64_t i = 0; i < S; ++i) {
        const std::int64_t last = c.causal ? i : S - 1;
        const std::int64_t first = c.causal && c.window > 0 ? std::max<std::int64_t>(0, i - c.window + 1) : 0;
        std::fill(p.begin() + i * S, p.begin() + (i + 1) * S, 0.0);
        double m = sinks ? (*sinks)[h] : -INFINITY;
        for (std::int64_t j = first; j <= last; ++j) {
          double s = 0;
          for (int d = 0; d < D; ++d) s += Q(i, d) * K(j, d);
          p[i * S + j] = s * scale;
          if (c.softcap > 0) {
            const double t = std::tanh(p[i * S + j] / c.softcap);
            p[i * S + j] = c.softcap * t;
            slope[i * S + j] = 1 - t * t;
          }
          m = std::max(m, p[i * S + j]);
        }
        double sum = sinks ? std::exp((*sinks)[h] - m) : 0;
        for (std::int64_t j = first; j <= last; ++j) sum += (p[i * S + j] = std::exp(p[i * S + j] - m));
        for (std::int64_t j = first; j <= last; ++j) {
          p[i * S + j] /= sum;
          used[i * S + j] = p[i * S + j] * kept(i, j);
        }
        r.lse[(b * c.heads + h) * S + i] = m + std::log(sum);
        double delta = 0;
        for (int d = 0; d < Dv; ++d) {
          double o = 0;
          for (std::int64_t j = first; j <= last; ++j) o += used[i * S + j] * V(j, d);
          r.o[((b * S + i) * c.heads + h) * Dv + d] = o;
          delta += o * dO(i, d);
        }
        if (sinks) {
          const double term = std::exp((*sinks)[h] - r.lse[(b * c.heads + h) * S + i]) * delta;
          r.dsinks[h] -= term;
          r.dsinks_magnitude[h] += std::abs(term);
        }
        for (std::int64_t j = first; j <= last; ++j) {
          double x = 0;
          for (int d = 0; d < Dv; ++d) x += dO(i, d) * V(j, d);
          dp[i * S + j] = p[i * S + j] * (x * kept(i, j) - delta) * slope[i * S + j];  // dS of the scaled score
        }
        for (std::int64_t j = first; j <= last; ++j) {
          for (int d = 0; d < D; ++d) {
            r.dq[((b * S + i) * c.heads + h) * D + d] += dp[i * S + j] * K(j, d) * scale;
            r.dk[((b * S + j) * c.kv_heads + g) * D + d] += dp[i * S + j] * Q(i, d) * scale;
          }
          for (int d = 0; d < Dv; ++d) r.dv[((b * S + j) * c.kv_heads + g) * Dv + d] += used[i * S + j] * dO(i, d);
        }
      }
    }
  return r;
}

// Copies the rows of a strided [tokens, width] view into a contiguous [tokens, width] array.
inline std::vector<double> compact_rows(const std::vector<double>& strided, std::int64_t tokens, std::int64_t width,
                            std::int64_t stride) {
  std::vector<double> out(tokens * width);
  for (std::int64_t t = 0; t < tokens; ++t)
    std::copy_n(strided.begin() + t * stride, width, out.begin() + t * width);
  return out;
}

}  // namespace twin::test
