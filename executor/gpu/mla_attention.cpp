// MLA's forward and backward as sequences of GEMMs and kernel entries (executor/gpu/mla_attention.hpp says which);
// every buffer beyond the saved tensors is stream-ordered scratch of the call.
#include "executor/gpu/mla_attention.hpp"

#include <algorithm>
#include <array>
#include <stdexcept>

#include "gpu/checks.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::exec {
namespace {

using kernels::bf16;

constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Saved tensors in MlaSaved's order: bf16 elements then fp32 ones (rows of the norms' and attention's statistics).
std::array<std::size_t, 11> saved_sizes_bytes(const MlaShape& s) {
  const std::int64_t t = s.tokens(), q_latent = s.q_lora_rank;
  return {align256(t * q_latent * 2), align256(t * q_latent * 2), align256(t * s.q_width() * 2),
          align256(t * s.kv_lora_rank * 2), align256(t * s.kv_lora_rank * 2), align256(t * s.q_width() * 2),
          align256(t * s.o_width() * 2), align256(t * s.o_width() * 2), align256(t * 4), align256(t * 4),
          align256(static_cast<std::size_t>(t) * s.heads * 4)};
}

// A strided copy of `rows` rows of `cols` bf16 elements.
void copy_rows(bf16* to, std::int64_t to_stride, const bf16* from, std::int64_t from_stride, std::int64_t rows,
               std::int64_t cols, cudaStream_t stream) {
  TWIN_CUDA_CHECK(cudaMemcpy2DAsync(to, to_stride * sizeof(bf16), from, from_stride * sizeof(bf16),
                                    cols * sizeof(bf16), rows, cudaMemcpyDeviceToDevice, stream));
}

// Stream-ordered scratch carved into 256-byte-aligned pieces.
class Scratch {
 public:
  Scratch(std::size_t bytes, cudaStream_t stream) : stream_(stream) {
    TWIN_CUDA_CHECK(cudaMallocAsync(&base_, bytes, stream));
  }
  ~Scratch() { cudaFreeAsync(base_, stream_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  template <class T>
  T* take(std::int64_t count) {
    T* p = reinterpret_cast<T*>(static_cast<char*>(base_) + used_);
    used_ += align256(static_cast<std::size_t>(count) * sizeof(T));
    return p;
  }

 private:
  void* base_ = nullptr;
  std::size_t used_ = 0;
  cudaStream_t stream_;
};

}  // namespace

std::size_t mla_saved_bytes(const MlaShape& s) {
  std::size_t total = 0;
  for (std::size_t bytes : saved_sizes_bytes(s)) total += bytes;
  return total;
}

MlaSaved mla_saved_in(void* base, const MlaShape& s) {
  const auto sizes = saved_sizes_bytes(s);
  char* at = static_cast<char*>(base);
  std::size_t i = 0;
  const auto next = [&]() {
    char* p = at;
    at += sizes[i++];
    return p;
  };
  MlaSaved saved;
  for (bf16** p : {&saved.cq, &saved.cq_n, &saved.q, &saved.ckv, &saved.ckv_n, &saved.k, &saved.v, &saved.o})
    *p = reinterpret_cast<bf16*>(next());
  for (float** p : {&saved.q_rstd, &saved.kv_rstd, &saved.lse}) *p = reinterpret_cast<float*>(next());
  if (s.q_lora_rank == 0) saved.cq = saved.cq_n = nullptr;
  return saved;
}

MlaAttention::MlaAttention(const MlaShape& shape, gpu::Attention& attention, Matmul& matmul, cudaStream_t stream)
    : shape_(shape), attention_(attention), matmul_(matmul),
      rope_table_(static_cast<std::size_t>(shape.seq) * (shape.rope / 2) * sizeof(float2)) {
  if (shape.tokens() <= 0 || shape.hidden <= 0 || shape.heads <= 0 || shape.kv_lora_rank <= 0 || shape.rope <= 0 ||
      shape.rope % 2 != 0 || shape.v <= 0 || shape.q_lora_rank < 0 || shape.nope < 0)
    throw std::invalid_argument("MLA: a shape of positive tokens, hidden, heads, kv_lora_rank, v_head_dim and an even "
                                "qk_pos_emb_head_dim is required");
  kernels::rope_build_table(static_cast<float2*>(rope_table_.data()), shape.seq, shape.rope, shape.rope_theta, stream);
}

kernels::AttentionDims MlaAttention::attention_dims() const {
  kernels::AttentionDims dims{shape_.batch, shape_.seq, shape_.heads, shape_.heads, shape_.q_head()};
  dims.v_head_dim = shape_.v;
  dims.v_row_stride = shape_.o_width();
  return dims;
}

// The queries' RoPE parts (each head's last `rope` elements) and the shared key's (the tail of a ckv row).
kernels::RopeShape MlaAttention::rope_shape(std::int64_t ckv_row_stride) const {
  kernels::RopeShape r;
  r.tokens = shape_.tokens();
  r.seq_len = shape_.seq;
  r.q_heads = shape_.heads;
  r.kv_heads = 1;
  r.head_dim = shape_.rope;
  r.q_row_stride = shape_.q_width();
  r.q_head_stride = shape_.q_head();
  r.k_row_stride = ckv_row_stride;
  return r;
}

void MlaAttention::gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, bool accumulate,
                        const bf16* a, const bf16* b, bf16* c, cudaStream_t stream) {
  MatmulProblem p;
  p.m = m, p.n = n, p.k = k, p.transpose_a = ta, p.transpose_b = tb, p.accumulate = accumulate;
  matmul_.run(p, a, b, c, stream);
}

void MlaAttention::forward(const bf16* x, const MlaWeights& w, const MlaSaved& saved, cudaStream_t stream) {
  const MlaShape& s = shape_;
  const std::int64_t t = s.tokens();
  if (s.q_lora_rank > 0) {
    gemm(t, s.q_lora_rank, s.hidden, false, false, false, x, w.q_down, saved.cq, stream);
    gpu::launch(gpu::NormForward{Normalization::rmsnorm, saved.cq, w.q_norm, nullptr, saved.cq_n, nullptr,
                                 saved.q_rstd, t, s.q_lora_rank, {}},
                stream);
    gemm(t, s.q_width(), s.q_lora_rank, false, false, false, saved.cq_n, w.q_up, saved.q, stream);
  } else {
    gemm(t, s.q_width(), s.hidden, false, false, false, x, w.q_up, saved.q, stream);
  }
  Scratch scratch(align256(t * s.ckv_width() * 2) + align256(t * s.kv_width() * 2), stream);
  bf16* ckv_full = scratch.take<bf16>(t * s.ckv_width());
  bf16* kv = scratch.take<bf16>(t * s.kv_width());
  gemm(t, s.ckv_width(), s.hidden, false, false, false, x, w.kv_down, ckv_full, stream);
  copy_rows(saved.ckv, s.kv_lora_rank, ckv_full, s.ckv_width(), t, s.kv_lora_rank, stream);
  gpu::launch(gpu::NormForward{Normalization::rmsnorm, saved.ckv, w.kv_norm, nullptr, saved.ckv_n, nullptr,
                               saved.kv_rstd, t, s.kv_lora_rank, {}},
              stream);
  gemm(t, s.kv_width(), s.kv_lora_rank, false, false, false, saved.ckv_n, w.kv_up, kv, stream);
  gpu::launch(gpu::RopeForward{saved.q + s.nope, ckv_full + s.kv_lora_rank,
                               static_cast<const float2*>(rope_table_.data()), rope_shape(s.ckv_width())},
              stream);
  kernels::mla_expand_kv(kv, ckv_full + s.kv_lora_rank, saved.k, saved.v,
                         {t, s.heads, s.nope, s.rope, s.v, s.ckv_width()}, stream);
  gpu::launch(gpu::AttentionForward{&attention_, saved.q, saved.k, saved.v, saved.o, saved.lse, attention_dims()},
              stream);
}

void MlaAttention::norm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, bf16* dx,
                                 bf16* weight_grad, bool accumulate, std::int64_t cols, float* partials,
                                 cudaStream_t stream) {
  gpu::NormBackward c;
  c.dy = dy, c.x = x, c.weight = weight, c.rstd = rstd, c.dx = dx, c.partials = partials;
  c.weight_grad = weight_grad, c.accumulate = accumulate, c.rows = shape_.tokens(), c.cols = cols;
  gpu::launch(c, stream);
}

void MlaAttention::backward(const bf16* x, const bf16* d_o, const MlaWeights& w, const MlaSaved& saved,
                            const MlaGradients& g, bool accumulate, bf16* d_x, bool add_to_dx, cudaStream_t stream) {
  const MlaShape& s = shape_;
  const std::int64_t t = s.tokens(), latent = std::max(s.q_lora_rank, s.kv_lora_rank);
  const std::int64_t partial_floats = static_cast<std::int64_t>(kernels::norm_partial_floats(t, latent));
  Scratch scratch(2 * align256(t * s.q_width() * 2) + align256(t * s.o_width() * 2) +
                      align256(t * s.kv_width() * 2) + align256(t * s.ckv_width() * 2) + 2 * align256(t * latent * 2) +
                      align256(partial_floats * 4),
                  stream);
  bf16 *dq = scratch.take<bf16>(t * s.q_width()), *dk = scratch.take<bf16>(t * s.q_width());
  bf16* dv = scratch.take<bf16>(t * s.o_width());
  bf16* d_kv = scratch.take<bf16>(t * s.kv_width());
  bf16* d_ckv_full = scratch.take<bf16>(t * s.ckv_width());
  bf16 *d_latent = scratch.take<bf16>(t * latent), *d_latent_n = scratch.take<bf16>(t * latent);
  float* partials = scratch.take<float>(partial_floats);

  gpu::launch(gpu::AttentionBackward{&attention_, saved.q, saved.k, saved.v, saved.o, d_o, saved.lse, dq, dk, dv,
                                     attention_dims()},
              stream);
  kernels::mla_reduce_kv_grad(dk, dv, d_kv, d_ckv_full + s.kv_lora_rank,
                              {t, s.heads, s.nope, s.rope, s.v, s.ckv_width()}, stream);
  gpu::launch(gpu::RopeBackward{dq + s.nope, d_ckv_full + s.kv_lora_rank,
                                static_cast<const float2*>(rope_table_.data()), rope_shape(s.ckv_width())},
              stream);
  // Keys and values: the up projection, the latent's norm, the down projection.
  gemm(s.kv_lora_rank, s.kv_width(), t, true, false, accumulate, saved.ckv_n, d_kv, g.kv_up, stream);
  gemm(t, s.kv_lora_rank, s.kv_width(), false, true, false, d_kv, w.kv_up, d_latent_n, stream);
  norm_backward(d_latent_n, saved.ckv, w.kv_norm, saved.kv_rstd, d_latent, g.kv_norm, accumulate, s.kv_lora_rank,
                partials, stream);
  copy_rows(d_ckv_full, s.ckv_width(), d_latent, s.kv_lora_rank, t, s.kv_lora_rank, stream);
  gemm(s.hidden, s.ckv_width(), t, true, false, accumulate, x, d_ckv_full, g.kv_down, stream);
  gemm(t, s.hidden, s.ckv_width(), false, true, add_to_dx, d_ckv_full, w.kv_down, d_x, stream);
  // Queries.
  if (s.q_lora_rank > 0) {
    gemm(s.q_lora_rank, s.q_width(), t, true, false, accumulate, saved.cq_n, dq, g.q_up, stream);
    gemm(t, s.q_lora_rank, s.q_width(), false, true, false, dq, w.q_up, d_latent_n, stream);
    norm_backward(d_latent_n, saved.cq, w.q_norm, saved.q_rstd, d_latent, g.q_norm, accumulate, s.q_lora_rank,
                  partials, stream);
    gemm(s.hidden, s.q_lora_rank, t, true, false, accumulate, x, d_latent, g.q_down, stream);
    gemm(t, s.hidden, s.q_lora_rank, false, true, true, d_latent, w.q_down, d_x, stream);
  } else {
    gemm(s.hidden, s.q_width(), t, true, false, accumulate, x, dq, g.q_up, stream);
    gemm(t, s.hidden, s.q_width(), false, true, true, dq, w.q_up, d_x, stream);
  }
}

}  // namespace twin::exec
