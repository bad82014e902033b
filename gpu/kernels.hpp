// The executor's CUDA kernels, one launcher per kernel: bf16 storage with fp32 arithmetic, row-major
// tensors, every launch checked (a failing launch throws std::runtime_error). Launchers only enqueue
// work on `stream`; nothing synchronizes. Compiled by nvcc (C++17) and included by C++20 code.
#pragma once
#include <cstddef>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "core/model_limits.hpp"
#include "core/shard_map.hpp"
#include "gpu/gradient_ref.hpp"

namespace twin::kernels {

using bf16 = __nv_bfloat16;

// ---- normalization (rows x cols; statistics per row kept in fp32 for backward) ----
// Where an RMSNorm's rows lie: contiguous (the default), or in groups of `group_rows` contiguous rows whose first
// rows are `group_stride` elements apart. QK-norm's rows are the query (or key) heads of each token inside the fused
// QKV row: group_rows = heads, group_stride = the QKV row's width. Statistics (rstd) stay one per row, contiguous.
struct NormRowLayout {
  std::int64_t group_rows = 0;  // 0: contiguous rows
  std::int64_t group_stride = 0;
};
// Which weight scales a row of an RMSNorm: one for every row (period 0), or two in one launch (QK-norm's q_norm and
// k_norm, `cols` values each, the second after the first): in every run of `period` consecutive rows (a token's
// query then key heads), rows from `second_from` on take the second. The weight gradient then has two rows in the
// same order, and the partials are twice as wide (norm_partial_floats(rows, weight_count() * cols)).
struct NormWeightRows {
  std::int64_t period = 0;
  std::int64_t second_from = 0;
  std::int64_t weight_count() const { return period == 0 ? 1 : 2; }
};
// y = x * rstd * weight, rstd = 1 / sqrt(mean(x^2) + eps); x and y laid out by `layout` (y may be x: in place).
void rmsnorm_forward(const bf16* x, const bf16* weight, bf16* y, float* rstd, std::int64_t rows, std::int64_t cols,
                     float eps, NormRowLayout layout, NormWeightRows weights, cudaStream_t stream);
// y = (x - mean) * rstd * weight + bias.
void layernorm_forward(const bf16* x, const bf16* weight, const bf16* bias, bf16* y, float* mean, float* rstd,
                       std::int64_t rows, std::int64_t cols, float eps, cudaStream_t stream);
// Weight (and bias) gradients are reduced in two deterministic steps: the backward kernel writes one
// fp32 partial per block of rows into `partials` (norm_partial_floats(rows, cols) floats; LayerNorm
// writes weight partials then bias partials, so twice that), then norm_weight_grad_reduce sums the
// partials in fp32 into the gradient (bf16 or fp32).
std::size_t norm_partial_floats(std::int64_t rows, std::int64_t cols);
// RMSNorm backward; with `skip` (may be null) dx also adds it: the residual stream's gradient that skips the norm's
// branch, so that the residual add of a pre-norm layer's backward needs no kernel of its own. x is laid out by
// `x_layout`; dy, dx and skip by `grad_layout` (dx may be dy: in place).
void rmsnorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* rstd, const bf16* skip, bf16* dx,
                      float* partials, std::int64_t rows, std::int64_t cols, NormRowLayout x_layout,
                      NormRowLayout grad_layout, NormWeightRows weights, cudaStream_t stream);
void layernorm_backward(const bf16* dy, const bf16* x, const bf16* weight, const float* mean, const float* rstd,
                        bf16* dx, float* partials, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// s[c] = sum over the partial blocks of partials[b * cols + c] (fp32); grad[c] = s[c], or with `accumulate`
// grad[c] + s[c] (gradients accumulate over micro-batches), rounded once to the gradient's type. `partial_blocks`
// from norm_partial_blocks.
std::int64_t norm_partial_blocks(std::int64_t rows);
void norm_weight_grad_reduce(const float* partials, std::int64_t partial_blocks, std::int64_t cols, GradRef grad,
                             bool accumulate, cudaStream_t stream);

// ---- rotary position embedding (Llama's rotate-half: pairs (i, i + head_dim/2)) ----
// table[pos * head_dim/2 + i] = (cos, sin) of pos * theta^(-2i / head_dim), for pos < max_positions.
void rope_build_table(float2* table, std::int64_t max_positions, int head_dim, float theta, cudaStream_t stream);
// q: [tokens, q_heads, head_dim], k: [tokens, kv_heads, head_dim], rotated in place; consecutive tokens
// are `*_row_stride` elements apart (a view into the fused QKV output). Token t is at position t % seq_len.
// q_head_stride (0: head_dim) spaces q's heads: MLA rotates only the last qk_pos_emb_head_dim elements of each
// query head (q points at the first head's RoPE part, the heads nope + rope apart).
struct RopeShape {
  std::int64_t tokens = 0, seq_len = 0;
  int q_heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t q_row_stride = 0, k_row_stride = 0;
  std::int64_t q_head_stride = 0;
};
void rope_forward(bf16* q, bf16* k, const float2* table, const RopeShape& shape, cudaStream_t stream);
// The inverse rotation, in place on dq and dk.
void rope_backward(bf16* dq, bf16* dk, const float2* table, const RopeShape& shape, cudaStream_t stream);

// ---- activations ----
// in: [rows, 2 cols] as gate | up; out[r, c] = silu(gate) * up.
void swiglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// din: [rows, 2 cols] = (d gate | d up).
void swiglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream);
// GeGLU (Gemma's MLP): SwiGLU's layout with GeLU's tanh approximation on the gate, out = gelu_tanh(gate) * up.
void geglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
void geglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                    cudaStream_t stream);
// gpt-oss's GLU (Megatron's quick GeGLU): out = quick_gelu(min(gate, clamp)) * (clamp(up, -clamp, clamp) + offset),
// quick_gelu(x) = x sigmoid(1.702 x); clamp 0: none. A clamped element's input gets no gradient.
struct GluTerms {
  float offset = 0, clamp = 0;
};
void quick_geglu_forward(const bf16* in, bf16* out, std::int64_t rows, std::int64_t cols, const GluTerms& terms,
                         cudaStream_t stream);
void quick_geglu_backward(const bf16* in, const bf16* dout, bf16* din, std::int64_t rows, std::int64_t cols,
                          const GluTerms& terms, cudaStream_t stream);
// GeLU, tanh approximation, over `count` elements.
void gelu_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream);
void gelu_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream);
// Squared ReLU (Nemotron-4), y = relu(x)^2 over `count` elements; dx = 2 relu(x) dy.
void squared_relu_forward(const bf16* x, bf16* y, std::int64_t count, cudaStream_t stream);
void squared_relu_backward(const bf16* x, const bf16* dy, bf16* dx, std::int64_t count, cudaStream_t stream);
// out = a + b (out may alias a or b).
void residual_add(const bf16* a, const bf16* b, bf16* out, std::int64_t count, cudaStream_t stream);
// grad += x over `count` elements, in fp32, rounded once to the gradient's type: a weight gradient written apart
// added into the main gradient (Megatron's main_grad.add_).
void add_to_gradient(const bf16* x, GradRef grad, std::int64_t count, cudaStream_t stream);

// ---- hidden dropout (Megatron's bias-dropout-add over a branch, and its dropout of the embedding's output) ----
// Which elements a dropout keeps is a function of their place in the step's batch, never of the GPUs' layout:
// element `col` of the batch's token t (its sequences one after another, t = sequence * seq_length + position) is
// element g = t * cols + col of cuRAND's Philox4x32-10 stream of `seed` and `subsequence` (the step and the dropout
// site): the 32-bit value that curand_init(seed, subsequence, g) followed by curand() gives. It is kept when that
// value is at least dropout_threshold(p) (probability 1 - p, to 2^-32), and then scaled by 1 / (1 - p). So a
// tensor-parallel, sequence-parallel or data-parallel split of the rows draws each element's mask as one GPU does,
// and the TP ranks holding a replicated tensor draw the same mask.
struct DropoutDraw {
  float probability = 0;          // p in [0, 1)
  std::uint64_t seed = 0;
  std::uint64_t subsequence = 0;  // the step and the site (executor/dropout_key.hpp)
};
std::uint32_t dropout_threshold(float probability);
// Rows [first_row, first_row + rows) of a [*, cols] tensor are the batch's tokens first_token, first_token + 1, ...
struct DropoutRun {
  std::int64_t first_row = 0, rows = 0, first_token = 0;
};
// Over one run's rows (cols a multiple of 8, the pointers at row 0 of the tensor, 16-byte aligned): out = residual +
// mask * x / (1 - p), or without a residual (null) out = mask * x / (1 - p); mask[r * cols + c] = 1 kept, 0 dropped.
// out may alias x or residual.
void dropout_add_forward(const bf16* residual, const bf16* x, bf16* out, std::uint8_t* mask, std::int64_t cols,
                         const DropoutRun& run, const DropoutDraw& draw, cudaStream_t stream);
// dx = dy * mask / (1 - p) over `count` elements (dx may alias dy).
void dropout_backward(const bf16* dy, const std::uint8_t* mask, bf16* dx, std::int64_t count, float probability,
                      cudaStream_t stream);

// ---- vocab-parallel embedding: this rank holds rows [vocab_start, vocab_start + vocab_rows) ----
// out[t] = table[tokens[t] - vocab_start], or zeros when the token lies in another shard.
void embedding_forward(const std::int32_t* tokens, const bf16* table, bf16* out, std::int64_t token_count,
                       std::int64_t hidden, std::int64_t vocab_start, std::int64_t vocab_rows, cudaStream_t stream);
// grad[tokens[t] - vocab_start] += dy[t], deterministically: token positions are sorted by token (CUB radix
// sort, stable) and each distinct token's rows are summed in fp32 in position order by one block, then added to
// the gradient row (bf16 or fp32) once. Rows no token names are left as they are.
std::size_t embedding_backward_workspace_bytes(std::int64_t token_count);
void embedding_backward(const std::int32_t* tokens, const bf16* dy, GradRef grad, void* workspace,
                        std::size_t workspace_bytes, std::int64_t token_count, std::int64_t hidden,
                        std::int64_t vocab_start, std::int64_t vocab_rows, cudaStream_t stream);

// ---- learned absolute position embeddings (GPT): rows [first_row, first_row + rows) of a [*, cols] tensor; row
// first_row + i is at position first_position + (phase + i) % period of the table [positions, cols] ----
struct PositionRun {
  std::int64_t first_row = 0, rows = 0, period = 1, phase = 0, first_position = 0;
};
// x[row] += table[position of row].
void position_embedding_forward(bf16* x, const bf16* table, const PositionRun& run, std::int64_t cols,
                                cudaStream_t stream);
// grad[position] += the sum of dy's rows at that position (fp32, in row order; no atomics: deterministic).
void position_embedding_backward(const bf16* dy, GradRef grad, const PositionRun& run, std::int64_t cols,
                                 cudaStream_t stream);

// ---- linear biases (y = x W + b) ----
// y[r, c] += bias[c] over rows x cols, in place.
void bias_add(bf16* y, const bf16* bias, std::int64_t rows, std::int64_t cols, cudaStream_t stream);
// grad = column sums of dy [rows, cols], or with `accumulate` grad + them: fp32 partials per block of rows
// (norm_partial_floats(rows, cols) floats) reduced by norm_weight_grad_reduce (deterministic).
void bias_grad(const bf16* dy, float* partials, GradRef grad, bool accumulate, std::int64_t rows, std::int64_t cols,
               cudaStream_t stream);
// grad += sums [cols], the column sums a GEMM's bias-gradient epilogue wrote in the gradient's own type (a later
// micro-batch's, into scratch): bf16 through bias_grad over one row (bf16(grad + sum)), fp32 through the reduction
// of one row of partials (no rounding). `partials`: cols floats of scratch (bf16 only).
void add_bias_grad_sums(const void* sums, float* partials, GradRef grad, std::int64_t cols, cudaStream_t stream);

// ---- softmax cross-entropy over a vocabulary shard (logits [rows, vocab_shard], this shard starts at
// vocab_start). Vocab-parallel use: local_stats -> all-reduce(max) of row_max into a global max ->
// rescale_sum_exp -> all-reduce(sum) of sum_exp and target_logit -> loss / backward. One shard:
// local_stats then loss, its row_max being the global max. ----
// One pass: row_max[r] = the shard's max logit; sum_exp[r] = sum_v exp(logit - row_max[r]); target_logit[r] =
// the logit of targets[r] if this shard holds it, else 0. With softcap > 0 every logit is soft-capped first,
// softcap x tanh(logit / softcap) (Gemma-2's final logits); 0: as stored.
void cross_entropy_local_stats(const bf16* logits, const std::int32_t* targets, float* row_max, float* sum_exp,
                               float* target_logit, std::int64_t rows, std::int64_t vocab_shard,
                               std::int64_t vocab_start, float softcap, cudaStream_t stream);
// sum_exp[r] *= exp(local_max[r] - global_max[r]): a shard's sum relative to the global max.
void cross_entropy_rescale_sum_exp(const float* local_max, const float* global_max, float* sum_exp, std::int64_t rows,
                                   cudaStream_t stream);
// loss[r] = log(sum_exp) + max - target_logit (fp32, per row).
void cross_entropy_loss(const float* global_max, const float* global_sum_exp, const float* target_logit, float* loss,
                        std::int64_t rows, cudaStream_t stream);
// dlogits = (softmax - onehot(target)) * grad_scale; dlogits may alias logits. With softcap > 0, the gradient of
// the stored logits through the cap: that times 1 - tanh^2(logit / softcap).
void cross_entropy_backward(const bf16* logits, const float* global_max, const float* global_sum_exp,
                            const std::int32_t* targets, bf16* dlogits, std::int64_t rows, std::int64_t vocab_shard,
                            std::int64_t vocab_start, float grad_scale, float softcap, cudaStream_t stream);

// ---- optimizer ----
struct AdamWParams {
  float lr = 3e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  int step = 1;  // 1-based, for bias correction
};
// How an optimizer state array is stored (core/optimizer_precision.hpp's fp32 and bf16).
enum class StateType : std::uint8_t { f32, bf16 };
struct AdamWState {
  float* master = nullptr;  // fp32 master weights; nullptr: the bf16 parameters are the main ones
  void* m = nullptr;
  StateType m_type = StateType::f32;
  void* v = nullptr;
  StateType v_type = StateType::f32;
  // Megatron's --store-param-remainders (training.store_param_remainders; master nullptr): the fp32 master is the
  // bf16 parameter's bits over these 16 low bits, as Transformer Engine's FusedAdam keeps it. The parameter is the
  // master rounded to bf16 half away from zero (its high half, one more where the remainder's top bit is set), so a
  // negative remainder says the parameter was rounded up; the pair holds the master exactly.
  std::int16_t* remainders = nullptr;
};
// Decoupled weight decay; grad (bf16 or fp32) is multiplied by *grad_scale first (the clip factor; nullptr = 1).
// Updates the master (fp32, or the parameters with their remainders, or, without either, the parameters), m and v
// in place with fp32 math and writes the bf16 parameters.
void adamw_step(const AdamWState& state, GradRef grad, bf16* param, std::int64_t count,
                const AdamWParams& params, const float* grad_scale, cudaStream_t stream);
// fp32 master weights and moments.
inline void adamw_step(float* master, float* m, float* v, const bf16* grad, bf16* param, std::int64_t count,
                       const AdamWParams& params, const float* grad_scale, cudaStream_t stream) {
  adamw_step(AdamWState{master, m, StateType::f32, v, StateType::f32}, grad, param, count, params, grad_scale, stream);
}
// Sum of squares of grad, added to *sum_squares (fp32): per-block partials in `partials`
// (grad_norm_partial_count() floats) then one reduction, so the result is deterministic.
int grad_norm_partial_count();
void grad_sum_squares(GradRef grad, std::int64_t count, float* partials, float* sum_squares, cudaStream_t stream);
// scale = min(1, max_norm / (sqrt(sum_squares) + 1e-6)).
void grad_clip_scale(const float* sum_squares, float max_norm, float* scale, cudaStream_t stream);

// The MoE kernels' limits: experts per layer, and experts each token is routed to.
inline constexpr int kMoeMaxExperts = 1024;
inline constexpr int kMoeMaxTopK = 8;

// ---- mixture of experts (dropless: every token reaches its top_k experts). A token's routed copies:
// routed = tokens * top_k, copy f = t * top_k + j is token t's j-th choice. ----
// How a router scores, chooses and weighs (core/model.hpp MoeConfig's router keys; Megatron's
// topk_routing_with_score_function). The default is the softmax router renormalised over the chosen k.
struct RouterScoring {
  bool sigmoid = false;      // scores sigmoid(logit) each (DeepSeek-V3); else the softmax over the experts
  bool pre_softmax = false;  // softmax only: the weights are the chosen probabilities as they are, not renormalised
  float topk_scale = 1.f;    // the weights times this (Megatron's --moe-router-topk-scaling-factor)
  const float* expert_bias = nullptr;  // [experts] or null: added to the scores for the choice alone (sigmoid only)
  // Group-limited routing (0: none): the experts in num_groups groups of consecutive indices; a token chooses among
  // the group_topk groups whose top-(top_k / group_topk) choice values sum highest (ties to the lower group).
  int num_groups = 0, group_topk = 0;
};
inline constexpr int kMoeMaxRouterGroups = kMaxExecutedRouterGroups;
// Router: per token the fp32 scores into probs [tokens, experts] (the softmax over all experts, or each logit's
// sigmoid; kept for the backward and the load-balancing loss) and the top_k experts, ties to the lower index,
// chosen by logit (the same order as either score's) or, with an expert bias, by score + bias (with groups, by the
// score where it is not the logit's softmax over the chosen: the values Megatron's group sums add); their weights
// expert_weight [tokens, top_k]: softmax, the chosen probabilities over their sum (with pre_softmax as they are);
// sigmoid, the chosen scores over their sum when top_k > 1 (as they are when 1); times topk_scale.
void moe_router_topk(const bf16* logits, float* probs, std::int32_t* expert_index, float* expert_weight,
                     std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring, cudaStream_t stream);
// Forced balance (Megatron's --moe-router-force-load-balancing: moe_utils.apply_random_logits draws the router's
// logits from a standard normal): logits [count] = N(0, 1) in bf16, element g from cuRAND's Philox4x32-10 stream
// of (seed, subsequence) at offset g, so that the same key draws the same logits. The top-k of such logits spreads
// every token's copies uniformly over the experts.
void moe_random_logits(bf16* logits, std::int64_t count, std::uint64_t seed, std::uint64_t subsequence,
                       cudaStream_t stream);
// Expert order of the routed copies: order[r] = the copy in row r of expert order (sorted by expert, stable:
// increasing f within an expert), routed_row[f] = r (the inverse), counts[e] = copies routed to expert e.
// expert_index [routed] holds values in [0, experts). Deterministic (CUB's stable radix sort, no atomics).
std::size_t moe_sort_workspace_bytes(std::int64_t routed, int experts);
void moe_sort_by_expert(const std::int32_t* expert_index, std::int64_t routed, int experts, std::int32_t* order,
                        std::int32_t* routed_row, std::int32_t* counts, void* workspace, std::size_t workspace_bytes,
                        cudaStream_t stream);
// An expert capacity (Megatron's apply_router_token_dropping, drop policy "probs"): of the copies routed to each
// expert at most `capacity` kept, those of the largest weight expert_weight [routed] (ties: the lower copy); with
// `pad` every expert gets exactly `capacity` rows, the ones beyond its copies padding. Writes order [rows] (the copy
// in expert-order row r; -1 for padding, and for the entries beyond the kept rows) and routed_row [routed] (the row
// of copy f; -1 for a dropped copy); expert e's rows follow expert e - 1's, so the kept rows (the sum over experts
// of min(copies, capacity), or experts x capacity when padded) come first. `rows` is at most `routed` (experts x
// capacity when padded): the caller may size order so before it knows the counts. Deterministic.
std::size_t moe_capacity_workspace_bytes(std::int64_t routed, int experts);
void moe_capacity_layout(const std::int32_t* expert_index, const float* expert_weight, std::int64_t routed,
                         int experts, std::int64_t capacity, bool pad, std::int32_t* order, std::int64_t rows,
                         std::int32_t* routed_row, void* workspace, std::size_t workspace_bytes, cudaStream_t stream);
// Dispatch: out[r] = in[order[r] / top_k] (`rows` expert-order rows of `cols`; an exact copy; zeros where order[r]
// is -1).
void moe_permute(const bf16* in, const std::int32_t* order, int top_k, bf16* out, std::int64_t rows,
                 std::int64_t cols, cudaStream_t stream);
// Combine: out[t] = add[t] + sum_j weight[t * top_k + j] * in[routed_row[t * top_k + j]], summed in fp32 in j order
// after add (the shared experts' output; nullptr: none; may be out, in place), copies of routed_row -1 left out;
// weight == nullptr means 1 (then it is the dispatch's backward: each token's gradient sums its copies').
void moe_unpermute(const bf16* in, const std::int32_t* routed_row, const float* weight, const bf16* add, bf16* out,
                   std::int64_t tokens, int top_k, std::int64_t cols, cudaStream_t stream);
// Combine backward over `rows` expert-order rows: d_in[r] = weight[f] * d_out[f / top_k] with f = order[r] (zeros
// where order[r] is -1); d_weight[f] = dot(d_out[f / top_k], in[routed_row[f]]) accumulated in fp32 (in: the expert
// outputs the forward combined), written for the copies in a row only (a dropped copy's is the caller's to zero).
// weight == nullptr means 1.
void moe_unpermute_backward(const bf16* d_out, const bf16* in, const std::int32_t* order,
                            const std::int32_t* routed_row, const float* weight, bf16* d_in, float* d_weight,
                            std::int64_t rows, int top_k, std::int64_t cols, cudaStream_t stream);
// Router backward: the logits' gradient d_logits [tokens, experts] (bf16) from
//  (1) the combine weights' gradient d_weight [tokens, top_k] (g), through the weights as moe_router_topk made them
//      (c = topk_scale, wg = sum_i w_i g_i over the chosen): softmax renormalised (w_j = c p_j / sum_chosen p),
//      d logit_{e_j} = w_j (g_j - wg / c), unchosen experts 0; pre_softmax (w_j = c p_j), through the full softmax,
//      d logit_e = p_e (G_e - wg) with G_e = c g_j at a chosen e, 0 elsewhere; sigmoid (s = probs), d logit_{e_j} =
//      s_j (1 - s_j) (c g_j - wg) / sum_chosen s when top_k > 1, s (1 - s) c g when 1, unchosen 0;
//  (2) the load-balancing loss of Switch Transformer as Megatron-LM computes it (switch_load_balancing_loss_func):
//      aux = aux_coeff * experts / (tokens * tokens * top_k) * sum_e counts[e] * sum_t q[t, e], q the softmax
//      probabilities or the sigmoid scores normalised over all experts (compute_routing_scores_for_aux_loss);
//      a_e = aux_coeff * experts * counts[e] / (tokens * tokens * top_k): softmax, d logit_{t,e} += p_{t,e} (a_e -
//      sum_i p_{t,i} a_i); sigmoid, d logit_{t,e} += s_{t,e} (1 - s_{t,e}) (a_e - sum_i q_{t,i} a_i) / sum_i s_{t,i}.
//      With aux_coeff == 0, counts may be null.
void moe_router_backward(const float* probs, const std::int32_t* expert_index, const float* expert_weight,
                         const float* d_weight, const std::int32_t* counts, float aux_coeff, bf16* d_logits,
                         std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring,
                         cudaStream_t stream);
// The load-balancing loss's value added to *aux_sum (device fp32 scalar): deterministic (one block, a fixed-order
// reduction). Sigmoid scores are normalised over each token's experts first.
void moe_aux_loss(const float* probs, const std::int32_t* counts, float aux_coeff, float* aux_sum,
                  std::int64_t tokens, int experts, int top_k, const RouterScoring& scoring, cudaStream_t stream);
// Aux-loss-free balancing's step (Megatron's get_updated_expert_bias): bias[e] += rate * sign(mean - counts[e]),
// the mean over the `experts` counts of the step (summed over every rank that routes the layer).
void moe_update_expert_bias(const std::int64_t* counts, float rate, float* bias, int experts, cudaStream_t stream);

// ---- causal self-attention, flash style (K/V tiles in shared memory, online softmax, no seq x seq
// matrix in memory). q: [batch * seq, heads, head_dim] with q_row_stride elements between tokens;
// k, v: [batch * seq, kv_heads, head_dim] with kv_row_stride; o: [batch * seq, heads, head_dim]
// contiguous. heads % kv_heads == 0 (GQA). head_dim is 64 or 128. ----
struct AttentionDims {
  std::int64_t batch = 0, seq = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  std::int64_t q_row_stride = 0, kv_row_stride = 0;  // 0: contiguous (heads * head_dim, kv_heads * head_dim)
  bool causal = true;
  // A block of context parallelism's ring (cuDNN backends only, gpu/attention.hpp): `seq` queries per sequence
  // against `seq_kv` keys (0: seq), the sequences `q_sequence_rows` rows apart in q, o, dO, dq and lse (0: seq)
  // and `kv_sequence_rows` apart in k, v, dk and dv (0: seq_kv). The twin kernels run only the defaults.
  std::int64_t seq_kv = 0, q_sequence_rows = 0, kv_sequence_rows = 0;
  // MLA (cuDNN backends only): values and outputs v_head_dim wide (0: head_dim), V's rows v_row_stride apart
  // (0: kv_row_stride, or kv_heads x v_head_dim, contiguous, where that is 0 too); the scores' scale stays
  // 1/sqrt(head_dim), the query-key width.
  int v_head_dim = 0;
  std::int64_t v_row_stride = 0;
  // Sliding window (causal only): each query sees at most `window` keys, itself and the window - 1 before it; 0:
  // the whole causal prefix (core/model.hpp's window_size, AttentionShape::window). Every backend runs it.
  std::int64_t window = 0;
  // Soft-capped scores (Gemma-2's attn_logit_softcapping): each scaled score becomes softcap x tanh(score /
  // softcap) before the mask and the softmax, and its gradient goes through the tanh; 0: as computed. Every backend
  // runs it.
  float softcap = 0;
};
// lse: [batch, heads, seq] fp32, the natural-log sum of exp of the scaled scores of each row (kept for
// backward).
void attention_forward(const bf16* q, const bf16* k, const bf16* v, bf16* o, float* lse, const AttentionDims& dims,
                       cudaStream_t stream);
// dq has q's layout; dk, dv have k's. `delta` is scratch of batch * heads * seq floats (rowsum(dO * O)).
// Three kernels: delta, then dK/dV by key block, then dQ by query block (no atomics: deterministic).
void attention_backward(const bf16* q, const bf16* k, const bf16* v, const bf16* o, const bf16* dout, const float* lse,
                        float* delta, bf16* dq, bf16* dk, bf16* dv, const AttentionDims& dims, cudaStream_t stream);

// ---- attention sinks (gpu/kernels/attention_sinks.cu) ----
// gpt-oss's learned sinks: one logit per head joins each row's softmax as a key with no value, so a row's
// probabilities sum to 1 - exp(sink - lse'). Any backend's plain attention, then these, is attention with sinks:
// with lse' = log(exp(lse) + exp(sink)) and O' = O exp(lse - lse'), the plain backward given (O', lse') is the sink
// softmax's backward for q, k and v, and the sink's own gradient is -sum over rows of exp(sink - lse') rowsum(dO O').
// o, dout [batch * seq, heads, v_head_dim] contiguous; lse [batch, heads, seq]; sinks [heads] (bf16, the weight).
struct AttentionSinkShape {
  std::int64_t batch = 0, seq = 0;
  int heads = 0, v_head_dim = 0;
};
// In place: lse becomes lse', o becomes O'. Eight lanes per (token, head).
void attention_sinks_forward(bf16* o, float* lse, const bf16* sinks, const AttentionSinkShape& shape,
                             cudaStream_t stream);
// d_sinks[h] = (accumulate ? d_sinks[h] : 0) + dsink_h, from the forward's O' and lse'. `partials` is scratch of
// attention_sink_partial_floats(shape) floats; the sum over rows runs in a fixed order (deterministic).
void attention_sinks_backward(const bf16* o, const bf16* dout, const float* lse, const bf16* sinks, float* partials,
                              bf16* d_sinks, bool accumulate, const AttentionSinkShape& shape, cudaStream_t stream);
std::size_t attention_sink_partial_floats(const AttentionSinkShape& shape);

// ---- multi-latent attention's heads (gpu/kernels/mla.cu) ----
// DeepSeek-V3's keys and values: the kv up-projection's output kv [tokens, heads, nope + v] holds each head's key
// without position (nope wide) and its value; one RoPE key k_pe [tokens, rope] (rows k_pe_row_stride apart: the tail
// of the kv down-projection's output) serves every head.
struct MlaHeads {
  std::int64_t tokens = 0;
  int heads = 0, nope = 0, rope = 0, v = 0;
  std::int64_t k_pe_row_stride = 0;
};
// k [tokens, heads, nope + rope] = (kv's nope part, k_pe) per head; v [tokens, heads, v] = kv's v part: the
// contiguous operands of attention (the shared key broadcast to the heads).
void mla_expand_kv(const bf16* kv, const bf16* k_pe, bf16* k, bf16* v, const MlaHeads& shape, cudaStream_t stream);
// The transpose: d_kv [tokens, heads, nope + v] = (dk's nope part, dv) per head, and d_k_pe [tokens, rope] (rows
// k_pe_row_stride apart) = the sum over heads of dk's RoPE part, in fp32, in head order (deterministic).
void mla_reduce_kv_grad(const bf16* dk, const bf16* dv, bf16* d_kv, bf16* d_k_pe, const MlaHeads& shape,
                        cudaStream_t stream);

// ---- context parallelism's ring attention (gpu/kernels/context.cu) ----
// Rows [first_row, first_row + rows) of each of `batch` sequences of `seq` rows: o [batch * seq, heads, head_dim],
// stats [batch, heads, seq], as attention_forward lays them out.
struct AttentionMergeShape {
  std::int64_t batch = 0, seq = 0, first_row = 0, rows = 0;
  int heads = 0, head_dim = 0;
};
// Folds a block's output and log-sum-exp (attention of the same queries against other keys) into the running
// fp32 output and log-sum-exp over the shape's rows: the softmax over the union of the keys. head_dim % 4 == 0.
void attention_merge(float* o_acc, float* lse_acc, const bf16* o_block, const float* lse_block,
                     const AttentionMergeShape& shape, cudaStream_t stream);
// acc[r * cols + c] += x[r * x_row_stride + c] in fp32 (a view's rows into a contiguous accumulator). cols and the
// stride multiples of 4, acc 16-byte and x 8-byte aligned (as attention's rows are); the same for the next.
void add_bf16_rows_to_f32(float* acc, const bf16* x, std::int64_t rows, std::int64_t cols, std::int64_t x_row_stride,
                          cudaStream_t stream);
// out[r * out_row_stride + c] = bf16(in[r * cols + c]): an fp32 accumulator into a view (the Q part of dQKV).
void f32_to_bf16_rows(const float* in, bf16* out, std::int64_t rows, std::int64_t cols, std::int64_t out_row_stride,
                      cudaStream_t stream);

// ---- parameters and gradient buffers ----
// out[r, c] = stddev * N(0,1) drawn from a counter-based hash of (seed, global index): every sharding
// of a weight holds exactly the values of the unsharded one.
void init_normal_shard(bf16* out, const ShardMap& map, std::uint64_t seed, float stddev, cudaStream_t stream);
void fill_bf16(bf16* out, std::int64_t count, float value, cudaStream_t stream);
// dst[r * dst_ld + c] = src[r * src_ld + c] for r < rows, c < cols: a rectangle between two row-major buffers (the
// pieces of a weight a hot-switching switch packs and unpacks). 16 bytes per load where pointers, strides and cols
// allow, else per element; cudaMemcpy2DAsync copied such rectangles at about 110 GB/s on an H100.
void copy_bf16_rows(bf16* dst, std::int64_t dst_ld, const bf16* src, std::int64_t src_ld, std::int64_t rows,
                    std::int64_t cols, cudaStream_t stream);
void bf16_to_f32(const bf16* in, float* out, std::int64_t count, cudaStream_t stream);
// *total += sum of values, in one block and a fixed order (deterministic; for per-token losses).
void add_sum_f32(const float* values, std::int64_t count, float* total, cudaStream_t stream);

// ---- fault injection ----
// A one-warp kernel on `stream` that runs for `seconds` and does nothing: a stuck kernel, for the watchdog's test.
void stall_stream(int seconds, cudaStream_t stream);

}  // namespace twin::kernels
