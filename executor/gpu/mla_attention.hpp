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
// (the norm entry reads and writes one layout) and its gradient goes back by another.
// Weights are stored [in, out] (y = x W), as every linear of the executor.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_runtime.h>

#include "executor/mla_layout.hpp"
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
// One micro-batch's forward tensors kept for the backward; o is the block's output.
struct MlaSaved {
  kernels::bf16 *cq = nullptr, *cq_n = nullptr;     // the query latent before and after its norm (q_lora_rank > 0)
  kernels::bf16* q = nullptr;                        // [tokens, heads, nope + rope], rotated
  kernels::bf16 *ckv = nullptr, *ckv_n = nullptr;   // the kv latent before and after its norm
  kernels::bf16 *k = nullptr, *v = nullptr, *o = nullptr;
  float *q_rstd = nullptr, *kv_rstd = nullptr, *lse = nullptr;
};
std::size_t mla_saved_bytes(const MlaShape& shape);
// The saved tensors laid out in `base` (mla_saved_bytes of it, 256-byte aligned).
MlaSaved mla_saved_in(void* base, const MlaShape& shape);

class MlaAttention {
 public:
  // Builds the RoPE table of the rope part (positions < shape.seq) on `stream`.
  MlaAttention(const MlaShape& shape, gpu::Attention& attention, Matmul& matmul, cudaStream_t stream);
  const MlaShape& shape() const { return shape_; }
  // saved.o = MLA(x). Scratch (the kv up projection's output) is allocated stream-ordered.
  void forward(const kernels::bf16* x, const MlaWeights& w, const MlaSaved& saved, cudaStream_t stream);
  // From d_o [tokens, o_width]: the weights' gradients stored (or added with `accumulate`), and d_x [tokens,
  // hidden] written, or added to (`add_to_dx`: the residual stream's gradient already there).
  void backward(const kernels::bf16* x, const kernels::bf16* d_o, const MlaWeights& w, const MlaSaved& saved,
                const MlaGradients& grads, bool accumulate, kernels::bf16* d_x, bool add_to_dx, cudaStream_t stream);

 private:
  kernels::AttentionDims attention_dims() const;
  kernels::RopeShape rope_shape(std::int64_t ckv_row_stride) const;
  // out = a b (or += with accumulate) for a [m, k], b [k, n] (transposes as named).
  void gemm(std::int64_t m, std::int64_t n, std::int64_t k, bool ta, bool tb, bool accumulate, const kernels::bf16* a,
            const kernels::bf16* b, kernels::bf16* c, cudaStream_t stream);
  // The norm of `rows` x `cols` and its weight's gradient.
  void norm_backward(const kernels::bf16* dy, const kernels::bf16* x, const kernels::bf16* weight, const float* rstd,
                     kernels::bf16* dx, kernels::bf16* weight_grad, bool accumulate, std::int64_t cols, float* partials,
                     cudaStream_t stream);

  MlaShape shape_;
  gpu::Attention& attention_;
  Matmul& matmul_;
  gpu::DeviceBuffer rope_table_;
};

}  // namespace twin::exec
