// Multi-latent attention (DeepSeek-V2/V3) on one GPU, TP 1: from a layer's normalised input x [tokens, hidden] to
// the attention output o [tokens, heads x v_head_dim] that the layer's output projection reads, and back. As
// DeepSeek-V3 computes it (Hugging Face's DeepseekV3Attention):
//   queries  q_lora_rank > 0: cq = x W_q_down [tokens, q_lora_rank], q = RMSNorm(cq) W_q_up; else q = x W_q;
//            q [tokens, heads, nope + rope], each head's last `rope` elements rotated (RoPE);
//   keys     ckv = x W_kv_down [tokens, kv_lora_rank + rope]: the latent, and one RoPE key k_pe shared by all heads;
//            kv = RMSNorm(latent) W_kv_up [tokens, heads, nope + v]; k = (kv's nope part, rotated k_pe) per head;
//   values   kv's v part; attention with d_qk = nope + rope, d_v = v, scale 1/sqrt(nope + rope) (no YaRN mscale).
// The projections run through the one matmul entry (gpu/matmul.hpp), the norms, RoPE and attention through their
// kernel entries (gpu/op_kernels.hpp); the shared key's broadcast and its gradient's sum over heads are
// kernels::mla_expand_kv and mla_reduce_kv_grad. The latent leaves the down projection's rows by a strided copy
// (the norm entry reads and writes one layout) and its gradient goes back by another. Each step of
// executor/mla_steps.hpp is one call (twin execute binds one op to each); forward and backward run them in order.
// Weights are stored [in, out] (y = x W), as every linear of the executor.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "executor/mla_layout.hpp"
#include "executor/mla_steps.hpp"
#include "gpu/attention.hpp"
#include "gpu/device_buffer.hpp"
#include "gpu/kernels.hpp"
#include "gpu/matmul.hpp"

namespace twin::exec {

// The attention's weights (or their gradients): q_up is the direct query projection [hidden, q_width] when
// q_lora_rank is 0 (q_down and q_norm then unused).
template <class T>
struct MlaTensors {
  T* q_down = nullptr;   // [hidden, q_lora_rank]
  T* q_norm = nullptr;   // [q_lora_rank]
  T* q_up = nullptr;     // [q_lora_rank, q_width], or [hidden, q_width]
  T* kv_down = nullptr;  // [hidden, kv_lora_rank + rope]
  T* kv_norm = nullptr;  // [kv_lora_rank]
  T* kv_up = nullptr;    // [kv_lora_rank, kv_width]
};
using MlaWeights = MlaTensors<const kernels::bf16>;
using MlaGradients = MlaTensors<kernels::bf16>;
// One micro-batch's forward tensors kept for the backward; o, the block's output, is the caller's (the output
// projection's input).
struct MlaSaved {
  kernels::bf16 *cq = nullptr, *cq_n = nullptr;     // the query latent before and after its norm (q_lora_rank > 0)
  kernels::bf16* q = nullptr;                        // [tokens, heads, nope + rope], rotated
  kernels::bf16 *ckv = nullptr, *ckv_n = nullptr;   // the kv latent before and after its norm
  kernels::bf16 *k = nullptr, *v = nullptr, *o = nullptr;
  float *q_rstd = nullptr, *kv_rstd = nullptr, *lse = nullptr;
};
std::size_t mla_saved_bytes(const MlaShape& shape);
// The saved tensors but o laid out in `base` (mla_saved_bytes of it, 256-byte aligned).
MlaSaved mla_saved_in(void* base, const MlaShape& shape);

// The forward's rows between its steps: the kv down projection's output (the latent, then the shared RoPE key,
// rotated in place) and the kv up projection's, from kv_down to expand.
struct MlaForwardRows {
  kernels::bf16 *ckv_full = nullptr, *kv = nullptr;
};
// The backward's: attention's input gradients, the up projection's output gradient, the down projection's, and a
// latent's gradient after and before its norm (the kv latent's, then the query latent's).
struct MlaBackwardRows {
  kernels::bf16 *dq = nullptr, *dk = nullptr, *dv = nullptr, *d_kv = nullptr, *d_ckv_full = nullptr;
  kernels::bf16 *d_latent_n = nullptr, *d_latent = nullptr;
};
std::size_t mla_forward_rows_bytes(const MlaShape& shape);
MlaForwardRows mla_forward_rows_in(void* base, const MlaShape& shape);
std::size_t mla_backward_rows_bytes(const MlaShape& shape);
MlaBackwardRows mla_backward_rows_in(void* base, const MlaShape& shape);

// What a step reads and writes (those it does not use may be left null). d_x is the block's input gradient.
struct MlaStepTensors {
  const kernels::bf16* x = nullptr;
  const kernels::bf16* d_o = nullptr;
  kernels::bf16* d_x = nullptr;
  MlaWeights w;
  MlaGradients g;
  MlaSaved saved;
  MlaForwardRows rows;
  MlaBackwardRows grad_rows;
};
// How a step runs: its GEMMs' cuBLASLt handle and workspace, a norm backward's partial sums (kernels::
// norm_partial_floats of tokens and the larger latent rank), its stream; a weight gradient stored or added
// (`accumulate`); the first input gradient (kv_down's) written into d_x or added to it (`add_to_dx`: the residual
// stream's gradient already there); the query's always add.
struct MlaStepContext {
  Matmul& matmul;
  float* norm_partials = nullptr;
  cudaStream_t stream = nullptr;
  bool accumulate = false, add_to_dx = false;
};

class MlaAttention {
 public:
  // Builds the RoPE table of the rope part (positions < shape.seq) on `stream`.
  MlaAttention(const MlaShape& shape, gpu::Attention& attention, cudaStream_t stream);
  const MlaShape& shape() const { return shape_; }
  // One step (executor/mla_steps.hpp): twin execute runs one per op.
  void run(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c);
  // A whole pass, mla_steps' steps in order, its rows stream-ordered scratch: saved.o = MLA(x); backward from d_o
  // [tokens, o_width] the weights' gradients and d_x [tokens, hidden].
  void forward(const kernels::bf16* x, const MlaWeights& w, const MlaSaved& saved, Matmul& matmul,
               cudaStream_t stream);
  void backward(const kernels::bf16* x, const kernels::bf16* d_o, const MlaWeights& w, const MlaSaved& saved,
                const MlaGradients& grads, bool accumulate, kernels::bf16* d_x, bool add_to_dx, Matmul& matmul,
                cudaStream_t stream);

 private:
  kernels::AttentionDims attention_dims() const;
  kernels::RopeShape rope_shape() const;
  kernels::MlaHeads heads_shape() const;
  // out = a b (or += with accumulate) for a [m, k], b [k, n] (transposes as named).
  static void gemm(const MlaStepContext& c, std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb,
                   bool accumulate, const kernels::bf16* a, const kernels::bf16* b, kernels::bf16* out);
  // The steps by kind: the projections' three products, the norms and the rest.
  void linear(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c);
  void norm(MlaStep step, const MlaStepTensors& t, const MlaStepContext& c);
  void latent_copy(bool backward, const MlaStepTensors& t, const MlaStepContext& c);
  void rope(bool backward, const MlaStepTensors& t, const MlaStepContext& c);
  void expand(bool backward, const MlaStepTensors& t, const MlaStepContext& c);
  void attend(bool backward, const MlaStepTensors& t, const MlaStepContext& c);

  MlaShape shape_;
  gpu::Attention& attention_;
  gpu::DeviceBuffer rope_table_;
};

}  // namespace twin::exec
