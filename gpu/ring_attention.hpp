// Context parallelism's ring attention, one block at a time, as Megatron shards a sequence (load balanced: CP
// rank r holds chunks r and 2cp-1-r of 2cp, its local rows [0, s/2) and [s/2, s)) and Transformer Engine runs
// the ring (AttnFuncWithCPAndKVP2P): at step k a rank computes its queries against the keys and values of the
// rank k places before it, j = (r - k) mod cp.
//   step 0   its own keys: causal (the two chunks keep their order, so the local causal mask is the global one);
//   j < r    all its queries against j's first chunk (j's second chunk lies after both of its own);
//   j > r    its second chunk's queries against all of j's keys (its first chunk lies before both of j's).
// Forward merges each block into an fp32 output by the blocks' log-sum-exps (a step of its own); backward runs each block against
// the merged output and log-sum-exp (a block's softmax is then the whole row's), adds dQ into an fp32
// accumulator and returns the block's dK and dV for the ring to carry home. The exchanges are the caller's.
#pragma once
#include <cstdint>

#include "gpu/attention.hpp"
#include "gpu/kernels.hpp"

namespace twin::gpu {

enum class RingBlock { diagonal, first_half_keys, second_half_queries };
RingBlock ring_block(int cp_rank, int step, int cp);

// The rank's local attention: batch sequences of `seq` rows (two chunks), heads and head_dim as the layer's;
// q rows q_row_stride apart (a view into the QKV output).
struct RingShape {
  std::int64_t batch = 0, seq = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t q_row_stride = 0;
  std::int64_t q_width() const { return static_cast<std::int64_t>(heads) * head_dim; }
  std::int64_t kv_width() const { return static_cast<std::int64_t>(kv_heads) * head_dim; }
  std::int64_t tokens() const { return batch * seq; }
};

// Bytes of a packed key-value block: [tokens, K | V] bf16, what the ring carries.
inline std::int64_t ring_kv_bytes(const RingShape& s) { return s.tokens() * 2 * s.kv_width() * 2; }

// Forward of one block: k and v rows kv_row_stride apart (the QKV output at step 0, a packed block after), its
// result into scratch_o (bf16 [tokens, heads * head_dim]) and its log-sum-exp into scratch_lse ([batch, heads,
// seq]; the diagonal block's straight into the running `lse`, which it starts).
void ring_forward_block(Attention& attention, RingBlock block, const RingShape& shape, const kernels::bf16* q,
                        const kernels::bf16* k, const kernels::bf16* v, std::int64_t kv_row_stride, float* lse,
                        kernels::bf16* scratch_o, float* scratch_lse, cudaStream_t stream);

// Folds a block's result into the running fp32 output o_acc ([tokens, heads * head_dim]) and lse: the diagonal's
// starts o_acc, a later one merges by the two log-sum-exps over the rows it computed.
void ring_merge_block(RingBlock block, const RingShape& shape, const kernels::bf16* scratch_o,
                      const float* scratch_lse, float* o_acc, float* lse, cudaStream_t stream);

// Backward of one block against a packed key-value block `kv`, with the merged output o (bf16 [tokens, heads *
// head_dim]), its gradient and the merged lse: adds the block's dQ into dq_acc (fp32 [tokens, heads * head_dim])
// and writes its dK | dV into `dkv` (packed as kv; zero in the rows the block does not reach). scratch_dq: bf16
// [tokens, q_row_stride].
void ring_backward_block(Attention& attention, RingBlock block, const RingShape& shape, const kernels::bf16* q,
                         const kernels::bf16* kv, const kernels::bf16* o, const kernels::bf16* dout, const float* lse,
                         float* dq_acc, kernels::bf16* scratch_dq, kernels::bf16* dkv, cudaStream_t stream);

// Copies a rank's own K | V out of the QKV output (rows qkv_row_stride apart, K after the queries) into a packed
// block.
void pack_ring_kv(const RingShape& shape, const kernels::bf16* qkv, std::int64_t qkv_row_stride, kernels::bf16* kv,
                  cudaStream_t stream);

}  // namespace twin::gpu
