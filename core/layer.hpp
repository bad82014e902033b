// The transformer layer, described once: its blocks in forward order, the weight each block owns, the
// tensors it reads and writes, and what it saves for its backward. The embedding and the output layer
// are described the same way. Everything that needs the layer's structure derives from this:
//   - the lowering (strategies/lowering_layer.cpp, and the Ulysses layer in strategies/per_layer/) walks
//     the blocks, forward in order and backward in reverse, and emits each block's ops;
//   - the memory model (strategies/memory.cpp) sums the tensors the blocks save (Korthikanti et al. 2022,
//     arXiv 2205.05198, tensor by tensor);
//   - the executor (executor/gpu/) keeps a unit's buffers under the tensors named here and finds a
//     linear's input and output, a norm's, a residual's, from its block.
// Sizes are symbolic (a Width times the rows of a Region): each user evaluates them in its own terms
// (the memory model over the whole model divided by tp, the executor per TP rank).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/op.hpp"
#include "core/strategy.hpp"

namespace twin::layer {

// The forward tensors of a unit (a layer, the embedding or the output layer), by what they hold.
enum class Tensor : std::uint8_t {
  input,                 // the unit's input: the previous unit's output
  input_norm_out, input_norm_stats,  // normalised input and its fp32 1/rms per row
  qkv,                   // queries, keys and values side by side (RoPE applied in place)
  attention_out, attention_stats,    // attention output and its fp32 softmax statistics
  projection_out,        // the attention branch (the row-parallel projection's output)
  attention_block_out,   // input + attention branch
  mlp_norm_out, mlp_norm_stats,
  fc1_out, activation_out, fc2_out,  // fc2_out: the MLP branch
  output,                // attention_block_out + MLP branch: the unit's output
  embedded,              // the embedding's rows (partial sums over a vocab-parallel TP group)
  final_norm_out, final_norm_stats,
  logits, row_max, global_row_max, sum_exp, target_logit, token_loss,  // vocab-parallel cross-entropy
  fp32_logits,  // the unfused cross-entropy's fp32 copy of the logits, left holding their softmax (core/unfused_loss.hpp)
  // An MoE layer's experts block (mlp_norm_out in, fc2_out out): the router's logits and fp32 softmax, each
  // token's top-k experts and combine weights, the routed copies in expert order (the copy of each row, the
  // row of each copy, the copies per expert), and the routed rows through the experts' MLPs.
  router_logits, router_probs, expert_choice, combine_weight, expert_order, routed_row, expert_counts,
  expert_input, expert_fc1_out, expert_activation_out, expert_out,
  // Under expert parallelism the copies in this rank's expert order before the dispatch all-to-all (expert_input
  // is what arrives at the experts' rank), and the experts' outputs back from the combine all-to-all.
  routed_input, routed_output,
  // Post norms: the attention branch (projection_out) and the MLP branch (fc2_out) normalised, what the residuals add.
  post_attention_norm_out, post_attention_norm_stats, post_mlp_norm_out, post_mlp_norm_stats,
  // An MTP depth's entry: the shifted tokens' embedding (embedded) and the hidden states (input) normalised, their
  // concatenation [embedding; hidden], and its projection (what the depth's transformer layer reads).
  mtp_embedding_norm_out, mtp_embedding_norm_stats, mtp_hidden_norm_out, mtp_hidden_norm_stats, mtp_concat,
  mtp_projected,
  count
};
inline constexpr int kTensorCount = static_cast<int>(Tensor::count);
std::string_view to_string(Tensor tensor);  // "qkv", "attention_out", ...

enum class BlockKind : std::uint8_t {
  norm,            // RMSNorm / LayerNorm of `input` into `output` (+ `stats`)
  column_linear,   // output = input W, W split by output columns over TP (input gathered under SP)
  row_linear,      // output = input W, W split by input rows over TP (output reduced over TP)
  core_attention,  // RoPE on Q and K (if the model has it), then softmax(Q K^T) V of `input` (qkv)
  // Multi-latent attention from the normalised input to the attention output, in place of the QKV linear and core
  // attention: the down projections, the latents' norms, the up projections, RoPE on the rope parts, the shared
  // RoPE key's broadcast to the heads, attention with d_qk = nope + rope and d_v = v_head_dim (as
  // executor/gpu/mla_attention.hpp runs it, one step of it per op).
  mla_attention,
  activation,      // GeLU or SwiGLU of fc1's output
  residual,        // output = input + branch
  experts,         // MoE: router, dispatch, expert MLPs, combine (in place of the dense MLP)
  embedding,       // vocab-parallel lookup, reduced over TP into the unit's output
  loss,            // vocab-parallel cross-entropy of the logits
};

// A width of a tensor; the rows come from its Region. In an MLA layer query_and_key is its queries' and expanded
// keys' (2 heads x (nope + rope)), value and query its values' and attention output's (heads x v_head_dim).
enum class Width : std::uint8_t {
  hidden, query_and_key, value, query, qkv, fc1, ffn,
  attention_scores,   // one score per key: the (local) sequence length, per head
  heads,              // one value per head
  experts,            // one router probability per expert
  expert_fc1, expert_ffn, vocab,
  shared_fc1, shared_ffn,  // an MoE layer's shared experts (0 without): FC1's output and FC2's input
  q_latent, kv_latent,     // MLA: the query's and the keys' and values' latents (q_lora_rank, kv_lora_rank)
  two_hidden,              // MTP: [embedding; hidden], eh_proj's input
  hidden_columns,          // MTP: eh_proj's output, h split by columns over TP (n of its GEMM)
};

// Where a tensor's rows are: the rank's own tokens outside the TP regions (tokens / tp under SP), all
// tokens sharded by columns inside a TP region (width / tp), or the token copies routed to experts.
enum class Region : std::uint8_t { sequence_sharded, tensor_sharded, routed };

// When a saved tensor is kept for backward (beyond "always").
enum class KeptWhen : std::uint8_t {
  always,
  hidden_dropout,                 // the dropout mask after a branch
  unrecomputed_unfused,           // core attention not recomputed (selective), unfused backend
  unrecomputed_unfused_dropout,   // ... with attention dropout
  unrecomputed_fused,             // core attention not recomputed, flash or fused backend
  fused_loss,                     // the loss in one kernel (framework.cross_entropy_loss_fusion)
  unfused_loss,                   // the loss in separate passes on fp32 logits
  qk_layernorm,                   // the model has QK-norm (its norm keeps its input)
  fp8_layer,                      // the layer's linears run in FP8 (training.fp8)
};

// A tensor a block keeps for its backward, `bytes_per_element` x rows(region) x width.
struct SavedTensor {
  std::string_view what;
  Width width;
  Region region;
  int bytes_per_element;
  KeptWhen kept = KeptWhen::always;
  // Kept only for a linear's weight gradient: in a layer whose linears run in FP8 (training.fp8) Transformer Engine
  // keeps its FP8 copy instead, 1 byte per element.
  bool fp8_in_fp8_layer = false;
  // The modules of selective recompute that drop it (Megatron's --recompute-modules: core/strategy.hpp); 0 for core
  // attention's own tensors, which `kept` says.
  RecomputeModuleMask dropped_by{};
  // It is the block's own input (Block::input), of which the block is the last forward reader in a dense layer: what
  // twin execute lets go of after the block's forward where a module in `dropped_by` is recomputed
  // (executor/gpu/dense_block_recompute.cpp).
  bool is_block_input = false;
};

struct Block {
  BlockKind kind;
  OpRole role;                 // the weight it owns, or the step it is
  Tensor input, output;
  Tensor branch = Tensor::count;  // residual: the branch added to `input`
  Tensor stats = Tensor::count;   // norm: fp32 1/rms per row
  Width out_width = Width::hidden, in_width = Width::hidden;  // linears: the forward GEMM's n and k
  std::span<const SavedTensor> saved = {};
};

// What a layer under full recompute keeps: its input (the rest is computed again in its backward).
inline constexpr SavedTensor kFullyRecomputedLayer{"layer input", Width::hidden, Region::sequence_sharded, 2};

// The blocks of one transformer layer in forward order: a dense MLP, or the experts of an MoE layer; QKV attention,
// or multi-latent attention (`mla`: the model's MlaConfig is enabled); with `post_norms` (Gemma-2 and 3) each
// branch normalised before its residual adds it.
std::span<const Block> layer_blocks(bool moe_layer, bool mla = false, bool post_norms = false);
// The embedding (first virtual stage) and the output layer (last virtual stage).
std::span<const Block> embedding_blocks();
std::span<const Block> head_blocks();
// An MTP depth's blocks before its transformer layer (Megatron's MultiTokenPredictionLayer._concat_embeddings): the
// embedding lookup of the shifted tokens, enorm, hnorm and eh_proj. Its transformer layer is layer_blocks' of the
// decoder's last layer kind, its final norm, shared output projection and loss head_blocks'.
std::span<const Block> mtp_entry_blocks();

// The residual block of a layer that adds `branch` to the stream, and the one that reads `stream` as its stream
// input (the skip path of `stream`'s gradient); throw when none does.
const Block& residual_adding(Tensor branch);
const Block& residual_reading(Tensor stream);
// Whether a residual block of the layer reads `block`'s input as its stream: the stream's gradient then has a
// skip path around `block` (a layer's input and MLP norms; not the head's final norm).
bool beside_skip_path(const Block& block);

// The block that owns `role` (a linear, norm or residual) in the layer, embedding or head; throws when
// no block has it.
const Block& block_of(OpRole role);
// Whether a linear block keeps its bf16 input for its weight gradient alone (a saved tensor with fp8_in_fp8_layer):
// in an FP8 layer its FP8 copy stands in for it, so the memory model counts the copy alone and twin execute frees
// the bf16 tensor once it is cast. False for every other block kind.
bool input_kept_only_for_weight_gradient(const Block& block);

// How many of `blocks`, from the first, a recompute that stops early runs again (PyTorch's non-reentrant checkpoint,
// core/framework.hpp recompute_stops_early): up to the block that makes the last tensor any block keeps for its
// backward. A block that keeps only its own input is not run again (PyTorch keeps an op's inputs before it runs the op),
// its input's maker is; the residual's dropout mask counts only with `hidden_dropout`. A dense layer: all but fc2 and
// the MLP's residual add.
std::size_t blocks_recomputed_by_early_stop(std::span<const Block> blocks, bool hidden_dropout);

}  // namespace twin::layer
