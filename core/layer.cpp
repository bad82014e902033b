// The blocks of the layer, the embedding and the output layer as Megatron-LM's GPT model runs them
// (pre-norm, RoPE inside core attention, hidden dropout after each branch), with the tensors each keeps
// for its backward as Korthikanti et al. 2022 count them: every 16-bit tensor 2 bytes per element, dropout
// masks 1, softmax statistics fp32.
#include "core/layer.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>

namespace twin::layer {
namespace {

using enum Width;
using enum Region;

constexpr std::array kNormSaved{SavedTensor{"norm input", hidden, sequence_sharded, 2}};
constexpr RecomputeModuleMask kLayernorm = module_bit(RecomputeModule::layernorm);
constexpr RecomputeModuleMask kMlp = module_bit(RecomputeModule::mlp), kMoe = module_bit(RecomputeModule::moe);
constexpr RecomputeModuleMask kMoeAct = module_bit(RecomputeModule::moe_act);
constexpr RecomputeModuleMask kSharedExperts = module_bit(RecomputeModule::shared_experts);
constexpr RecomputeModuleMask kMlaUpProj = module_bit(RecomputeModule::mla_up_proj);

// The QKV's and FC1's input is the pre-norm's output, which `layernorm` recompute discards and makes again
// (transformer_layer.py:475; under FP8 the linear then keeps that bf16 output instead of its FP8 copy:
// set_save_original_input, :530).
constexpr std::array kColumnLinearSaved{
    SavedTensor{"linear input (the norm's output)", hidden, sequence_sharded, 2, KeptWhen::always, true, kLayernorm,
                true}};
// Two lists of saved tensors as one (a block's span is one array).
template <std::size_t N, std::size_t M>
constexpr std::array<SavedTensor, N + M> joined(const std::array<SavedTensor, N>& a,
                                                const std::array<SavedTensor, M>& b) {
  std::array<SavedTensor, N + M> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = a[i];
  for (std::size_t i = 0; i < M; ++i) out[N + i] = b[i];
  return out;
}

// What core attention keeps, whichever projections made its queries, keys and values: its inputs (in an MLA layer
// the up projections' outputs, which `mla_up_proj` recompute discards: multi_latent_attention.py:455, 983), then
// its scores or statistics.
template <RecomputeModuleMask inputs_dropped_by>
constexpr std::array kScoresSaved{
    SavedTensor{"Q and K, for Q K^T", query_and_key, tensor_sharded, 2, KeptWhen::always, false, inputs_dropped_by},
    SavedTensor{"V", value, tensor_sharded, 2, KeptWhen::always, false, inputs_dropped_by},
    SavedTensor{"softmax output", attention_scores, tensor_sharded, 2, KeptWhen::unrecomputed_unfused},
    SavedTensor{"attention dropout mask", attention_scores, tensor_sharded, 1, KeptWhen::unrecomputed_unfused_dropout},
    SavedTensor{"attention dropout output", attention_scores, tensor_sharded, 2, KeptWhen::unrecomputed_unfused_dropout},
    SavedTensor{"log-sum-exp per query and head", heads, tensor_sharded, 4, KeptWhen::unrecomputed_fused},
};
constexpr auto kAttentionSaved = joined(
    std::array{SavedTensor{"Q and K before QK-norm", query_and_key, tensor_sharded, 2, KeptWhen::qk_layernorm}},
    kScoresSaved<RecomputeModuleMask{}>);
// Multi-latent attention keeps what executor/gpu/mla_attention.hpp's MlaSaved holds: the down projections' input
// (their weight gradients), each latent before its norm and after it (the up projection's input), then what core
// attention keeps, its queries and (expanded) keys d_qk = nope + rope wide per head, its values d_v. Under TP the
// latents are whole on every rank, on the rank's rows as the hidden rows are (Megatron's down projections are
// duplicated and run on the sequence-parallel rows; the up projections keep their input before their SP gather).
constexpr auto kMlaSaved = joined(
    std::array{
        SavedTensor{"down projections' input (the norm's output)", hidden, sequence_sharded, 2, KeptWhen::always, true,
                    kLayernorm},
        SavedTensor{"query latent (its norm's input)", q_latent, sequence_sharded, 2},
        SavedTensor{"normalised query latent (q up's input)", q_latent, sequence_sharded, 2, KeptWhen::always, true},
        SavedTensor{"kv latent (its norm's input)", kv_latent, sequence_sharded, 2},
        SavedTensor{"normalised kv latent (kv up's input)", kv_latent, sequence_sharded, 2, KeptWhen::always, true}},
    kScoresSaved<kMlaUpProj>);
// In an FP8 layer the projection keeps its input's FP8 copy for its weight gradient beside the bf16 attention output,
// which attention's backward reads (Transformer Engine's _Linear saves its quantized input, columnwise only when the
// input is not gathered; module/linear.py at NVIDIA/TransformerEngine d0067d0da6).
constexpr std::array kProjectionSaved{
    SavedTensor{"attention output", query, tensor_sharded, 2},
    SavedTensor{"attention output's FP8 copy (the projection's weight-gradient input)", query, tensor_sharded, 1,
                KeptWhen::fp8_layer}};
constexpr std::array kResidualSaved{SavedTensor{"dropout mask", hidden, sequence_sharded, 1, KeptWhen::hidden_dropout}};
// A dense MLP under `mlp` recompute keeps its input only (the norm's output, FC1's saved input): CheckpointFunction
// over the MLP (transformer_layer.py:992).
constexpr std::array kActivationSaved{
    SavedTensor{"activation input (fc1 output)", fc1, tensor_sharded, 2, KeptWhen::always, false, kMlp, true}};
constexpr std::array kFc2Saved{SavedTensor{"fc2 input", ffn, tensor_sharded, 2, KeptWhen::always, true, kMlp, true}};
// Under `moe` recompute the MoE layer keeps its input only (moe_layer.py:701: a checkpoint over the layer); `moe_act`
// discards the experts' activation output, FC2's input (experts.py:1019; under FP8 FC2 keeps it in bf16 then,
// set_save_original_input); `shared_experts` checkpoints the shared experts over their input (moe_layer.py:517).
constexpr std::array kExpertsSaved{
    SavedTensor{"router input", hidden, sequence_sharded, 2, KeptWhen::always, false, kLayernorm},
    SavedTensor{"router probabilities", experts, sequence_sharded, 4, KeptWhen::always, false, kMoe},
    SavedTensor{"permuted tokens (expert fc1 input)", hidden, routed, 2, KeptWhen::always, true, kMoe},
    SavedTensor{"expert fc1 output", expert_fc1, routed, 2, KeptWhen::always, false, kMoe},
    SavedTensor{"expert fc2 input", expert_ffn, routed, 2, KeptWhen::always, true, kMoe | kMoeAct},
    SavedTensor{"expert outputs (the combine weights' gradient)", hidden, routed, 2, KeptWhen::always, false, kMoe},
    SavedTensor{"shared experts' fc1 output", shared_fc1, tensor_sharded, 2, KeptWhen::always, false,
                kMoe | kSharedExperts},
    SavedTensor{"shared experts' fc2 input", shared_ffn, tensor_sharded, 2, KeptWhen::always, false,
                kMoe | kSharedExperts},
};
constexpr std::array kEmbeddingSaved{SavedTensor{"dropout mask", hidden, sequence_sharded, 1, KeptWhen::hidden_dropout}};
constexpr std::array kOutputProjectionSaved{SavedTensor{"output projection input", hidden, sequence_sharded, 2}};
// The fused loss (twin execute's kernel, executor/gpu/dense_block_ends.cpp; Transformer Engine's parallel
// cross-entropy, Megatron's --cross-entropy-fusion-impl te, alike) keeps the bf16 logits and writes their
// gradient over them; the unfused one keeps its fp32 copy of them (megatron/core/tensor_parallel/cross_entropy.py
// saves the fp32 softmax). Megatron's native fused loss (its default implementation) also saves the fp32 softmax.
constexpr std::array kLossSaved{
    SavedTensor{"bf16 logits, their gradient written over them", vocab, tensor_sharded, 2, KeptWhen::fused_loss},
    SavedTensor{"fp32 logits (softmax)", vocab, tensor_sharded, 4, KeptWhen::unfused_loss},
};

using T = Tensor;

constexpr Block kInputNorm{BlockKind::norm, OpRole::input_norm, T::input, T::input_norm_out, T::count,
                           T::input_norm_stats, hidden, hidden, kNormSaved};
constexpr Block kQkv{BlockKind::column_linear, OpRole::qkv_projection, T::input_norm_out, T::qkv, T::count, T::count,
                     qkv, hidden, kColumnLinearSaved};
constexpr Block kAttention{BlockKind::core_attention, OpRole::core_attention, T::qkv, T::attention_out, T::count,
                           T::attention_stats, hidden, hidden, kAttentionSaved};
constexpr Block kMlaAttention{BlockKind::mla_attention, OpRole::core_attention, T::input_norm_out, T::attention_out,
                              T::count, T::attention_stats, query, hidden, kMlaSaved};
constexpr Block kProjection{BlockKind::row_linear, OpRole::attention_projection, T::attention_out, T::projection_out,
                            T::count, T::count, hidden, query, kProjectionSaved};
constexpr Block kAttentionResidual{BlockKind::residual, OpRole::attention_residual, T::input, T::attention_block_out,
                                   T::projection_out, T::count, hidden, hidden, kResidualSaved};
constexpr Block kMlpNorm{BlockKind::norm, OpRole::mlp_norm, T::attention_block_out, T::mlp_norm_out, T::count,
                         T::mlp_norm_stats, hidden, hidden, kNormSaved};
constexpr Block kFc1{BlockKind::column_linear, OpRole::fc1, T::mlp_norm_out, T::fc1_out, T::count, T::count, fc1,
                     hidden, kColumnLinearSaved};
constexpr Block kActivation{BlockKind::activation, OpRole::activation, T::fc1_out, T::activation_out, T::count,
                            T::count, ffn, fc1, kActivationSaved};
constexpr Block kFc2{BlockKind::row_linear, OpRole::fc2, T::activation_out, T::fc2_out, T::count, T::count, hidden,
                     ffn, kFc2Saved};
constexpr Block kExperts{BlockKind::experts, OpRole::router, T::mlp_norm_out, T::fc2_out, T::count, T::count, hidden,
                         hidden, kExpertsSaved};
constexpr Block kMlpResidual{BlockKind::residual, OpRole::mlp_residual, T::attention_block_out, T::output, T::fc2_out,
                             T::count, hidden, hidden, kResidualSaved};

// Post norms (Gemma2DecoderLayer's post_attention_layernorm and post_feedforward_layernorm): the branch normalised,
// and the residual adding the normalised branch.
constexpr Block kPostAttentionNorm{BlockKind::norm, OpRole::post_attention_norm, T::projection_out,
                                   T::post_attention_norm_out, T::count, T::post_attention_norm_stats, hidden, hidden,
                                   kNormSaved};
constexpr Block kPostAttentionResidual{BlockKind::residual, OpRole::attention_residual, T::input,
                                       T::attention_block_out, T::post_attention_norm_out, T::count, hidden, hidden,
                                       kResidualSaved};
constexpr Block kPostMlpNorm{BlockKind::norm, OpRole::post_mlp_norm, T::fc2_out, T::post_mlp_norm_out, T::count,
                             T::post_mlp_norm_stats, hidden, hidden, kNormSaved};
constexpr Block kPostMlpResidual{BlockKind::residual, OpRole::mlp_residual, T::attention_block_out, T::output,
                                 T::post_mlp_norm_out, T::count, hidden, hidden, kResidualSaved};

constexpr std::array kDenseLayer{kInputNorm, kQkv, kAttention, kProjection, kAttentionResidual,
                                 kMlpNorm,   kFc1, kActivation, kFc2,       kMlpResidual};
constexpr std::array kMoeLayer{kInputNorm, kQkv, kAttention, kProjection, kAttentionResidual,
                               kMlpNorm,   kExperts, kMlpResidual};

constexpr std::array kMlaDenseLayer{kInputNorm, kMlaAttention, kProjection, kAttentionResidual,
                                    kMlpNorm,   kFc1,          kActivation, kFc2, kMlpResidual};
constexpr std::array kMlaMoeLayer{kInputNorm, kMlaAttention, kProjection, kAttentionResidual,
                                  kMlpNorm,   kExperts,      kMlpResidual};
// A layer with post norms, from the layer without: each residual preceded by its branch's norm and adding the
// normalised branch; every other block as it is.
template <std::size_t N>
constexpr std::array<Block, N + 2> with_post_norms(const std::array<Block, N>& layer) {
  std::array<Block, N + 2> out{};
  std::size_t i = 0;
  for (const Block& block : layer) {
    if (block.role == OpRole::attention_residual) {
      out[i++] = kPostAttentionNorm;
      out[i++] = kPostAttentionResidual;
    } else if (block.role == OpRole::mlp_residual) {
      out[i++] = kPostMlpNorm;
      out[i++] = kPostMlpResidual;
    } else {
      out[i++] = block;
    }
  }
  if (i != N + 2) throw std::logic_error("a layer without its two residuals");  // a compile error here: constexpr
  return out;
}
constexpr auto kPostNormDenseLayer = with_post_norms(kDenseLayer);
constexpr auto kPostNormMoeLayer = with_post_norms(kMoeLayer);
constexpr auto kPostNormMlaDenseLayer = with_post_norms(kMlaDenseLayer);
constexpr auto kPostNormMlaMoeLayer = with_post_norms(kMlaMoeLayer);
constexpr std::array kEmbedding{Block{BlockKind::embedding, OpRole::embedding, T::input, T::embedded, T::count,
                                      T::count, hidden, vocab, kEmbeddingSaved}};
constexpr std::array kHead{
    Block{BlockKind::norm, OpRole::final_norm, T::input, T::final_norm_out, T::count, T::final_norm_stats, hidden,
          hidden, kNormSaved},
    Block{BlockKind::column_linear, OpRole::output_projection, T::final_norm_out, T::logits, T::count, T::count, vocab,
          hidden, kOutputProjectionSaved},
    Block{BlockKind::loss, OpRole::loss, T::logits, T::token_loss, T::count, T::count, vocab, vocab, kLossSaved},
};

constexpr std::array kMtpProjectionSaved{
    SavedTensor{"[embedding; hidden] (eh_proj input)", two_hidden, sequence_sharded, 2, KeptWhen::always, true}};
constexpr std::array kMtpEntry{
    Block{BlockKind::embedding, OpRole::embedding, T::input, T::embedded, T::count, T::count, hidden, vocab,
          kEmbeddingSaved},
    Block{BlockKind::norm, OpRole::mtp_embedding_norm, T::embedded, T::mtp_embedding_norm_out, T::count,
          T::mtp_embedding_norm_stats, hidden, hidden, kNormSaved},
    Block{BlockKind::norm, OpRole::mtp_hidden_norm, T::input, T::mtp_hidden_norm_out, T::count,
          T::mtp_hidden_norm_stats, hidden, hidden, kNormSaved},
    Block{BlockKind::column_linear, OpRole::mtp_projection, T::mtp_concat, T::mtp_projected, T::count, T::count,
          hidden_columns, two_hidden, kMtpProjectionSaved},
};

constexpr std::array<std::string_view, kTensorCount> kTensorNames{
    "input", "input_norm_out", "input_norm_stats", "qkv", "attention_out", "attention_stats", "projection_out",
    "attention_block_out", "mlp_norm_out", "mlp_norm_stats", "fc1_out", "activation_out", "fc2_out", "output",
    "embedded", "final_norm_out", "final_norm_stats", "logits", "row_max", "global_row_max", "sum_exp", "target_logit", "token_loss",
    "fp32_logits",
    "router_logits", "router_probs", "expert_choice", "combine_weight", "expert_order", "routed_row", "expert_counts",
    "expert_input", "expert_fc1_out", "expert_activation_out", "expert_out", "routed_input", "routed_output",
    "post_attention_norm_out", "post_attention_norm_stats", "post_mlp_norm_out", "post_mlp_norm_stats",
    "mtp_embedding_norm_out", "mtp_embedding_norm_stats", "mtp_hidden_norm_out", "mtp_hidden_norm_stats", "mtp_concat",
    "mtp_projected"};

}  // namespace

std::string_view to_string(Tensor tensor) {
  const auto index = static_cast<std::size_t>(tensor);
  return index < kTensorNames.size() ? kTensorNames[index] : "none";
}

std::span<const Block> layer_blocks(bool moe_layer, bool mla, bool post_norms) {
  if (post_norms && mla) return moe_layer ? std::span<const Block>(kPostNormMlaMoeLayer) : kPostNormMlaDenseLayer;
  if (post_norms) return moe_layer ? std::span<const Block>(kPostNormMoeLayer) : kPostNormDenseLayer;
  if (mla) return moe_layer ? std::span<const Block>(kMlaMoeLayer) : std::span<const Block>(kMlaDenseLayer);
  if (moe_layer) return kMoeLayer;
  return kDenseLayer;
}
std::span<const Block> embedding_blocks() { return kEmbedding; }
std::span<const Block> head_blocks() { return kHead; }
std::span<const Block> mtp_entry_blocks() { return kMtpEntry; }

namespace {
const Block& residual_where(bool (*matches)(const Block&, Tensor), Tensor tensor) {
  for (const Block& block : kDenseLayer)  // an MoE layer has the same residuals
    if (block.kind == BlockKind::residual && matches(block, tensor)) return block;
  throw std::logic_error("the layer description has no residual block for " + std::string(to_string(tensor)));
}
}  // namespace

const Block& residual_adding(Tensor branch) {
  return residual_where([](const Block& b, Tensor t) { return b.branch == t; }, branch);
}
const Block& residual_reading(Tensor stream) {
  return residual_where([](const Block& b, Tensor t) { return b.input == t; }, stream);
}

bool beside_skip_path(const Block& block) {
  const bool in_layer = std::ranges::any_of(kDenseLayer, [&](const Block& b) { return b.role == block.role; });
  return in_layer && std::ranges::any_of(kDenseLayer, [&](const Block& b) {
           return b.kind == BlockKind::residual && b.input == block.input;
         });
}

const Block& block_of(OpRole role) {
  for (std::span<const Block> blocks :
       {layer_blocks(false), layer_blocks(true), layer_blocks(false, true), layer_blocks(false, false, true),
        embedding_blocks(), head_blocks(), mtp_entry_blocks()})
    for (const Block& block : blocks)
      if (block.role == role) return block;
  throw std::logic_error("the layer description has no block for " + to_string(role));
}

bool input_kept_only_for_weight_gradient(const Block& block) {
  if (block.kind != BlockKind::column_linear && block.kind != BlockKind::row_linear) return false;
  for (const SavedTensor& saved : block.saved)
    if (saved.fp8_in_fp8_layer) return true;
  return false;
}

std::size_t blocks_recomputed_by_early_stop(std::span<const Block> blocks, bool hidden_dropout) {
  std::size_t runs_again = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i)
    for (const SavedTensor& saved : blocks[i].saved) {
      if (saved.kept == KeptWhen::hidden_dropout && !hidden_dropout) continue;
      if (!saved.is_block_input) {
        runs_again = i + 1;
        continue;
      }
      for (std::size_t maker = i; maker-- > 0;)  // none: the unit's own input, made before it
        if (blocks[maker].output == blocks[i].input) {
          runs_again = std::max(runs_again, maker + 1);
          break;
        }
    }
  return runs_again;
}

}  // namespace twin::layer
