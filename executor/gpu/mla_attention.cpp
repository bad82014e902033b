// MLA's steps as GEMMs and kernel entries (executor/gpu/mla_attention.hpp says which), one call each; the whole
// passes hold their rows in stream-ordered scratch of the call.
#include "executor/gpu/mla_attention.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "gpu/checks.hpp"
#include "gpu/op_kernels.hpp"

namespace twin::exec {
namespace {

using kernels::bf16;

constexpr std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

// Saved tensors in MlaSaved's order but o: bf16 elements then fp32 ones (rows of the norms' and attention's
// statistics).
std::array<std::size_t, 10> saved_sizes_bytes(const MlaShape& s) {
  const std::int64_t t = s.tokens(), q_latent = s.q_lora_rank;
  return {align256(t * q_latent * 2), align256(t * q_latent * 2), align256(t * s.q_width() * 2),
          align256(t * s.kv_lora_rank * 2), align256(t * s.kv_lora_rank * 2), align256(t * s.q_width() * 2),
          align256(t * s.o_width() * 2), align256(t * 4), align256(t * 4),
          align256(static_cast<std::size_t>(t) * s.heads * 4)};
}
std::array<std::size_t, 2> forward_rows_bytes(const MlaShape& s) {
  return {align256(s.tokens() * s.ckv_width() * 2), align256(s.tokens() * s.kv_width() * 2)};
}
std::array<std::size_t, 7> backward_rows_bytes(const MlaShape& s) {
  const std::int64_t t = s.tokens(), latent = std::max(s.q_lora_rank, s.kv_lora_rank);
  return {align256(t * s.q_width() * 2),   align256(t * s.q_width() * 2), align256(t * s.o_width() * 2),
          align256(t * s.kv_width() * 2),  align256(t * s.ckv_width() * 2), align256(t * latent * 2),
          align256(t * latent * 2)};
}
template <std::size_t N>
std::size_t sum(const std::array<std::size_t, N>& sizes) {
  std::size_t total = 0;
  for (std::size_t bytes : sizes) total += bytes;
  return total;
}
// `base` cut into pieces of `sizes`, written through `out` in order.
template <std::size_t N, class T>
void cut(void* base, const std::array<std::size_t, N>& sizes, std::initializer_list<T**> out) {
  char* at = static_cast<char*>(base);
  std::size_t i = 0;
  for (T** p : out) {
    *p = reinterpret_cast<T*>(at);
    at += sizes[i++];
  }
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

std::size_t mla_saved_bytes(const MlaShape& s) { return sum(saved_sizes_bytes(s)); }

MlaSaved mla_saved_in(void* base, const MlaShape& s) {
  const auto sizes = saved_sizes_bytes(s);
  MlaSaved saved;
  cut(base, sizes, {&saved.cq, &saved.cq_n, &saved.q, &saved.ckv, &saved.ckv_n, &saved.k, &saved.v});
  std::array<std::size_t, 3> stats{sizes[7], sizes[8], sizes[9]};
  cut(static_cast<char*>(base) + sum(sizes) - sum(stats), stats, {&saved.q_rstd, &saved.kv_rstd, &saved.lse});
  if (s.q_lora_rank == 0) saved.cq = saved.cq_n = nullptr;
  return saved;
}

std::size_t mla_forward_rows_bytes(const MlaShape& s) { return sum(forward_rows_bytes(s)); }
MlaForwardRows mla_forward_rows_in(void* base, const MlaShape& s) {
  MlaForwardRows rows;
  cut(base, forward_rows_bytes(s), {&rows.ckv_full, &rows.kv});
  return rows;
}
std::size_t mla_backward_rows_bytes(const MlaShape& s) { return sum(backward_rows_bytes(s)); }
MlaBackwardRows mla_backward_rows_in(void* base, const MlaShape& s) {
  MlaBackwardRows r;
  cut(base, backward_rows_bytes(s), {&r.dq, &r.dk, &r.dv, &r.d_kv, &r.d_ckv_full, &r.d_latent_n, &r.d_latent});
  return r;
}

MlaAttention::MlaAttention(const MlaShape& shape, gpu::Attention& attention, cudaStream_t stream)
    : shape_(shape), attention_(attention),
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
kernels::RopeShape MlaAttention::rope_shape() const {
  kernels::RopeShape r;
  r.tokens = shape_.tokens();
  r.seq_len = shape_.seq;
  r.q_heads = shape_.heads;
  r.kv_heads = 1;
  r.head_dim = shape_.rope;
  r.q_row_stride = shape_.q_width();
  r.q_head_stride = shape_.q_head();
  r.k_row_stride = shape_.ckv_width();
  return r;
}

kernels::MlaHeads MlaAttention::heads_shape() const {
  const MlaShape& s = shape_;
  return {s.tokens(), s.heads, s.nope, s.rope, s.v, s.ckv_width()};
}

void MlaAttention::gemm(const MlaStepContext& c, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                        bool accumulate, const bf16* a, const bf16* b, bf16* out) {
  MatmulProblem p;
  p.m = m, p.n = n, p.k = k, p.transpose_a = ta, p.transpose_b = tb, p.accumulate = accumulate;
  c.matmul.run(p, a, b, out, c.stream);
}

void MlaAttention::run(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c) {
  switch (step) {
    case MlaStep::q_down:
    case MlaStep::q_up:
    case MlaStep::kv_down:
    case MlaStep::kv_up:
    case MlaStep::kv_up_input_grad:
    case MlaStep::kv_up_weight_grad:
    case MlaStep::kv_down_input_grad:
    case MlaStep::kv_down_weight_grad:
    case MlaStep::q_up_input_grad:
    case MlaStep::q_up_weight_grad:
    case MlaStep::q_down_input_grad:
    case MlaStep::q_down_weight_grad: return linear(step, t, c);
    case MlaStep::q_norm:
    case MlaStep::kv_norm:
    case MlaStep::kv_norm_backward:
    case MlaStep::q_norm_backward: return norm(step, t, c);
    case MlaStep::kv_latent_copy: return latent_copy(false, t, c);
    case MlaStep::kv_latent_copy_backward: return latent_copy(true, t, c);
    case MlaStep::rope: return rope(false, t, c);
    case MlaStep::rope_backward: return rope(true, t, c);
    case MlaStep::expand: return expand(false, t, c);
    case MlaStep::expand_backward: return expand(true, t, c);
    case MlaStep::attention: return attend(false, t, c);
    case MlaStep::attention_backward: return attend(true, t, c);
  }
}

// Each projection y = x W [tokens, out] from W [in, out]: forward y; input gradient dx = dy W^T; weight gradient
// dW = x^T dy. The direct query projection (q_lora_rank 0) reads the block's input where q_up reads the latent.
void MlaAttention::linear(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c) {
  const MlaShape& s = shape_;
  const std::int64_t tokens = s.tokens();
  const MlaSaved& sv = t.saved;
  const MlaBackwardRows& g = t.grad_rows;
  const bool latent = s.q_lora_rank > 0;
  const std::int64_t q_in = latent ? s.q_lora_rank : s.hidden;
  const bf16* q_up_input = latent ? sv.cq_n : t.x;
  bf16* q_up_input_grad = latent ? g.d_latent_n : t.d_x;
  const bool acc = c.accumulate;
  switch (step) {
    case MlaStep::q_down: return gemm(c, tokens, s.q_lora_rank, s.hidden, false, false, false, t.x, t.w.q_down, sv.cq);
    case MlaStep::q_up: return gemm(c, tokens, s.q_width(), q_in, false, false, false, q_up_input, t.w.q_up, sv.q);
    case MlaStep::kv_down:
      return gemm(c, tokens, s.ckv_width(), s.hidden, false, false, false, t.x, t.w.kv_down, t.rows.ckv_full);
    case MlaStep::kv_up:
      return gemm(c, tokens, s.kv_width(), s.kv_lora_rank, false, false, false, sv.ckv_n, t.w.kv_up, t.rows.kv);
    case MlaStep::kv_up_input_grad:
      return gemm(c, tokens, s.kv_lora_rank, s.kv_width(), false, true, false, g.d_kv, t.w.kv_up, g.d_latent_n);
    case MlaStep::kv_up_weight_grad:
      return gemm(c, s.kv_lora_rank, s.kv_width(), tokens, true, false, acc, sv.ckv_n, g.d_kv, t.g.kv_up);
    case MlaStep::kv_down_input_grad:
      return gemm(c, tokens, s.hidden, s.ckv_width(), false, true, c.add_to_dx, g.d_ckv_full, t.w.kv_down, t.d_x);
    case MlaStep::kv_down_weight_grad:
      return gemm(c, s.hidden, s.ckv_width(), tokens, true, false, acc, t.x, g.d_ckv_full, t.g.kv_down);
    case MlaStep::q_up_input_grad:  // into the latent's gradient, or added to the input's (direct)
      return gemm(c, tokens, q_in, s.q_width(), false, true, !latent, g.dq, t.w.q_up, q_up_input_grad);
    case MlaStep::q_up_weight_grad:
      return gemm(c, q_in, s.q_width(), tokens, true, false, acc, q_up_input, g.dq, t.g.q_up);
    case MlaStep::q_down_input_grad:
      return gemm(c, tokens, s.hidden, s.q_lora_rank, false, true, true, g.d_latent, t.w.q_down, t.d_x);
    case MlaStep::q_down_weight_grad:
      return gemm(c, s.hidden, s.q_lora_rank, tokens, true, false, acc, t.x, g.d_latent, t.g.q_down);
    case MlaStep::q_norm:
    case MlaStep::kv_latent_copy:
    case MlaStep::kv_norm:
    case MlaStep::rope:
    case MlaStep::expand:
    case MlaStep::attention:
    case MlaStep::attention_backward:
    case MlaStep::expand_backward:
    case MlaStep::rope_backward:
    case MlaStep::kv_norm_backward:
    case MlaStep::kv_latent_copy_backward:
    case MlaStep::q_norm_backward: break;  // run() sends only the projections here
  }
  throw std::logic_error("MLA: " + std::string(to_string(step)) + " is not a projection's product");
}

// The latents' RMSNorms: forward normalised latent and 1/rms; backward the latent's gradient (d_latent) from its
// normalised form's (d_latent_n) and the weight's gradient.
void MlaAttention::norm(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c) {
  const bool query = step == MlaStep::q_norm || step == MlaStep::q_norm_backward;
  const bool backward = step == MlaStep::q_norm_backward || step == MlaStep::kv_norm_backward;
  const MlaSaved& sv = t.saved;
  const std::int64_t cols = query ? shape_.q_lora_rank : shape_.kv_lora_rank;
  const bf16* weight = query ? t.w.q_norm : t.w.kv_norm;
  bf16* in = query ? sv.cq : sv.ckv;
  float* rstd = query ? sv.q_rstd : sv.kv_rstd;
  if (!backward) {
    bf16* out = query ? sv.cq_n : sv.ckv_n;
    gpu::launch(gpu::NormForward{Normalization::rmsnorm, in, weight, nullptr, out, nullptr, rstd, shape_.tokens(),
                                 cols, {}},
                c.stream);
    return;
  }
  gpu::NormBackward n;
  n.dy = t.grad_rows.d_latent_n, n.x = in, n.weight = weight, n.rstd = rstd, n.dx = t.grad_rows.d_latent;
  n.partials = c.norm_partials, n.weight_grad = query ? t.g.q_norm : t.g.kv_norm, n.accumulate = c.accumulate;
  n.rows = shape_.tokens(), n.cols = cols;
  gpu::launch(n, c.stream);
}

// The kv latent out of the down projection's rows for its norm; backward its gradient into the rows' gradient.
void MlaAttention::latent_copy(bool backward, const MlaStepTensors& t, const MlaStepContext& c) {
  const MlaShape& s = shape_;
  if (backward)
    copy_rows(t.grad_rows.d_ckv_full, s.ckv_width(), t.grad_rows.d_latent, s.kv_lora_rank, s.tokens(),
              s.kv_lora_rank, c.stream);
  else
    copy_rows(t.saved.ckv, s.kv_lora_rank, t.rows.ckv_full, s.ckv_width(), s.tokens(), s.kv_lora_rank, c.stream);
}

// One launch over every query head's rope part and the shared key's (in place in the kv down projection's rows).
void MlaAttention::rope(bool backward, const MlaStepTensors& t, const MlaStepContext& c) {
  const MlaShape& s = shape_;
  const auto* table = static_cast<const float2*>(rope_table_.data());
  if (backward)
    gpu::launch(gpu::RopeBackward{t.grad_rows.dq + s.nope, t.grad_rows.d_ckv_full + s.kv_lora_rank, table,
                                  rope_shape()},
                c.stream);
  else
    gpu::launch(gpu::RopeForward{t.saved.q + s.nope, t.rows.ckv_full + s.kv_lora_rank, table, rope_shape()},
                c.stream);
}

void MlaAttention::expand(bool backward, const MlaStepTensors& t, const MlaStepContext& c) {
  const std::int64_t k_pe = shape_.kv_lora_rank;
  if (backward)
    kernels::mla_reduce_kv_grad(t.grad_rows.dk, t.grad_rows.dv, t.grad_rows.d_kv, t.grad_rows.d_ckv_full + k_pe,
                                heads_shape(), c.stream);
  else
    kernels::mla_expand_kv(t.rows.kv, t.rows.ckv_full + k_pe, t.saved.k, t.saved.v, heads_shape(), c.stream);
}

void MlaAttention::attend(bool backward, const MlaStepTensors& t, const MlaStepContext& c) {
  const MlaSaved& sv = t.saved;
  const MlaBackwardRows& g = t.grad_rows;
  if (backward)
    gpu::launch(gpu::AttentionBackward{&attention_, sv.q, sv.k, sv.v, sv.o, t.d_o, sv.lse, g.dq, g.dk, g.dv,
                                       attention_dims()},
                c.stream);
  else
    gpu::launch(gpu::AttentionForward{&attention_, sv.q, sv.k, sv.v, sv.o, sv.lse, attention_dims()}, c.stream);
}

void MlaAttention::forward(const bf16* x, const MlaWeights& w, const MlaSaved& saved, Matmul& matmul,
                           cudaStream_t stream) {
  Scratch scratch(mla_forward_rows_bytes(shape_), stream);
  MlaStepTensors t;
  t.x = x, t.w = w, t.saved = saved, t.rows = mla_forward_rows_in(scratch.take<char>(0), shape_);
  const MlaStepContext c{matmul, nullptr, stream};
  for (MlaStep step : mla_steps(false, shape_.q_lora_rank > 0)) run(step, t, c);
}

void MlaAttention::backward(const bf16* x, const bf16* d_o, const MlaWeights& w, const MlaSaved& saved,
                            const MlaGradients& grads, bool accumulate, bf16* d_x, bool add_to_dx, Matmul& matmul,
                            cudaStream_t stream) {
  const MlaShape& s = shape_;
  const auto partial_floats = static_cast<std::int64_t>(
      kernels::norm_partial_floats(s.tokens(), std::max(s.q_lora_rank, s.kv_lora_rank)));
  Scratch scratch(mla_backward_rows_bytes(s) + align256(partial_floats * 4), stream);
  MlaStepTensors t;
  t.x = x, t.d_o = d_o, t.d_x = d_x, t.w = w, t.g = grads, t.saved = saved;
  t.grad_rows = mla_backward_rows_in(scratch.take<char>(static_cast<std::int64_t>(mla_backward_rows_bytes(s))), s);
  const MlaStepContext c{matmul, scratch.take<float>(partial_floats), stream, accumulate, add_to_dx};
  for (MlaStep step : mla_steps(true, s.q_lora_rank > 0)) run(step, t, c);
}

}  // namespace twin::exec
