// Activation bytes per layer and per unit (the embedding, the output layer, an MTP depth's entry): the tensors the
// layer description's blocks save (core/layer.hpp), tensor by tensor after Korthikanti et al. 2022 (arXiv
// 2205.05198), less what recompute drops: full recompute keeps the layer's input only; selective recompute drops
// what its modules repeat (core attention's scores and statistics, SavedTensor::dropped_by for the others).
#include <algorithm>
#include <cmath>
#include <span>

#include "core/layer.hpp"
#include "core/moe_routing.hpp"
#include "strategies/memory.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {

// Korthikanti's terms for one micro-batch on one GPU: s local tokens of b sequences, widths over the whole
// model, a factor for the region (1/tp inside TP regions; outside them 1/tp under SP).
struct SavedTerms {
  const ModelConfig& model;
  double s, b;
  double outside, inside;
  double tp;
  RecomputeModuleMask recomputed;  // what selective recompute repeats (core_attn: the attention's own tensors)
  double routed_imbalance;  // the busiest EP rank's routed copies over the mean (core/moe_routing.hpp)
  bool fused_loss = true;   // framework.cross_entropy_loss_fusion: which logits the loss keeps
  bool fp8 = false;         // the layer's linears in FP8: their weight-gradient inputs kept as FP8 copies
  // Expert TP: a rank holds its expert-TP group's routed copies (gathered by the alltoall dispatcher) at 1/etp of
  // the experts' widths, so its hidden-wide routed tensors are etp times the copies it receives.
  double expert_tensor = 1;

  double width(layer::Width width) const {
    const ModelConfig& m = model;
    const double h = static_cast<double>(m.hidden_size), a = m.num_attention_heads;
    const double d = m.kv_channels > 0 ? static_cast<double>(m.kv_channels) : h / a;
    double q = a * d, kv = m.num_query_groups * d, v = kv, o = q;  // query, key, value and attention output widths
    if (m.mla.enabled()) {  // every head's query and (expanded) key nope + rope wide, its value v_head_dim
      q = kv = a * static_cast<double>(m.mla.qk_head_dim + m.mla.qk_pos_emb_head_dim);
      v = o = a * static_cast<double>(m.mla.v_head_dim);
    }
    const double gate = is_gated(m.activation) ? 2 : 1;
    const double shared = static_cast<double>(m.moe.shared_expert_ffn_hidden_size);
    switch (width) {
      case layer::Width::hidden: return h;
      case layer::Width::query_and_key: return q + kv;
      case layer::Width::value: return v;
      case layer::Width::query: return o;
      case layer::Width::qkv: return q + 2 * kv;
      case layer::Width::fc1: return gate * static_cast<double>(m.ffn_hidden_size);
      case layer::Width::ffn: return static_cast<double>(m.ffn_hidden_size);
      case layer::Width::attention_scores: return a * s;
      case layer::Width::heads: return a;
      case layer::Width::experts: return m.moe.num_experts;
      case layer::Width::expert_fc1: return gate * static_cast<double>(m.moe.ffn_hidden_size) / expert_tensor;
      case layer::Width::expert_ffn: return static_cast<double>(m.moe.ffn_hidden_size) / expert_tensor;
      case layer::Width::vocab: return static_cast<double>(padded_vocab_size(m, static_cast<int>(tp)));
      case layer::Width::shared_fc1: return gate * shared;
      case layer::Width::shared_ffn: return shared;
      case layer::Width::q_latent: return static_cast<double>(m.mla.q_lora_rank);
      case layer::Width::kv_latent: return static_cast<double>(m.mla.kv_lora_rank);
      case layer::Width::two_hidden: return 2 * h;
      case layer::Width::hidden_columns: return h;
    }
    return 0;
  }

  bool kept(layer::KeptWhen when) const {
    const bool unfused = model.attention_backend == AttentionBackend::unfused;
    const bool recompute_none = !recomputes(recomputed, RecomputeModule::core_attn);
    switch (when) {
      case layer::KeptWhen::always: return true;
      case layer::KeptWhen::hidden_dropout: return model.hidden_dropout > 0;
      case layer::KeptWhen::unrecomputed_unfused: return recompute_none && unfused;
      case layer::KeptWhen::unrecomputed_unfused_dropout:
        return recompute_none && unfused && model.attention_dropout > 0;
      case layer::KeptWhen::unrecomputed_fused: return recompute_none && !unfused;
      case layer::KeptWhen::fused_loss: return fused_loss;
      case layer::KeptWhen::unfused_loss: return !fused_loss;
      case layer::KeptWhen::qk_layernorm: return model.qk_layernorm;
      case layer::KeptWhen::fp8_layer: return fp8;
    }
    return false;
  }

  double bytes(const layer::SavedTensor& t) const {
    if (!kept(t.kept) || t.dropped_by.contains_any_of(recomputed)) return 0;
    const double w = width(t.width);
    const double element = fp8 && t.fp8_in_fp8_layer ? 1 : t.bytes_per_element;
    switch (t.region) {
      case layer::Region::sequence_sharded: return element * s * b * w * outside;
      case layer::Region::tensor_sharded: return element * s * b * w * inside;
      case layer::Region::routed:  // the rank's token copies, top_k per token, the busiest rank's share
        return element * (s * b * outside * model.moe.top_k * routed_imbalance * expert_tensor) * w;
    }
    return 0;
  }

  double bytes(std::span<const layer::Block> blocks) const {
    double total = 0;
    for (const layer::Block& block : blocks)
      for (const layer::SavedTensor& saved : block.saved) total += bytes(saved);
    return total;
  }

  // The largest of the modules' dropped tensors: a module's recompute makes them again together, right before the
  // backward that uses them, and they are held while it runs (CheckpointWithoutOutput's recompute hook and
  // CheckpointFunction, megatron/core/tensor_parallel/random.py). layernorm counts both norms' outputs, an upper bound:
  // each is made again before its own branch's backward.
  double largest_recomputed_module(std::span<const layer::Block> blocks) const {
    double largest = 0;
    for (int i = 0; i < kRecomputeModuleCount; ++i) {
      const RecomputeModuleMask module = module_bit(static_cast<RecomputeModule>(i));
      if (!recomputed.contains_any_of(module)) continue;
      double dropped = 0;
      for (const layer::Block& block : blocks)
        for (const layer::SavedTensor& saved : block.saved)
          if (saved.dropped_by.contains_any_of(module) && kept(saved.kept)) {
            layer::SavedTensor whole = saved;
            whole.dropped_by = {};
            dropped += bytes(whole);
          }
      largest = std::max(largest, dropped);
    }
    return largest;
  }
};

SavedTerms saved_terms(const ModelConfig& model, double local_seq, int micro_batch_size, int tensor_parallel,
                       bool sequence_parallel, RecomputeModuleMask recomputed, int expert_parallel) {
  const double t = tensor_parallel;
  const double outside = sequence_parallel && tensor_parallel > 1 ? 1.0 / t : 1.0;
  // The busiest EP rank of the most skewed MoE layer: its routed copies are what the rank must hold.
  double routed_imbalance = 1.0;
  if (model.is_moe() && expert_parallel > 1) {  // one rank holding every expert holds every copy: the mean
    const double copies = local_seq * micro_batch_size * outside * model.moe.top_k * expert_parallel;
    for (const ExpertParallelLoad& load : layer_loads(model, expert_parallel, copies))
      routed_imbalance = std::max(routed_imbalance, load.rank_load);
  }
  return {model,  local_seq, static_cast<double>(micro_batch_size),     outside, 1.0 / t, t,
          recomputed, routed_imbalance};
}

// The modules of selective recompute (none under none and full).
RecomputeModuleMask selective_modules(Recompute recompute, RecomputeModuleMask modules) {
  return recompute == Recompute::selective ? modules : RecomputeModuleMask{};
}

SavedTerms layer_terms(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size, int tensor_parallel,
                       bool sequence_parallel, int context_parallel, RecomputeModuleMask recomputed,
                       int expert_parallel, bool fp8_layer, int expert_tensor_parallel) {
  SavedTerms terms = saved_terms(model, static_cast<double>(seq_length) / context_parallel, micro_batch_size,
                                 tensor_parallel, sequence_parallel, recomputed, expert_parallel);
  terms.fp8 = fp8_layer;
  terms.expert_tensor = expert_tensor_parallel;
  return terms;
}

// The embedding and the output layer keep what they keep whatever the recompute: `rows` tokens (micro-batch
// times local sequence) of a TP group.
SavedTerms edge_terms(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  SavedTerms terms = saved_terms(scenario.model, rows, 1, tensor_parallel, sequence_parallel, RecomputeModuleMask{}, 1);
  terms.fused_loss = scenario.framework.cross_entropy_loss_fusion;
  return terms;
}

}  // namespace

Bytes activation_bytes_per_layer(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                 int tensor_parallel, bool sequence_parallel, int context_parallel,
                                 Recompute recompute, bool moe_layer, int expert_parallel, bool fp8_layer,
                                 RecomputeModuleMask modules, int expert_tensor_parallel) {
  const SavedTerms terms = layer_terms(model, seq_length, micro_batch_size, tensor_parallel, sequence_parallel,
                                       context_parallel, selective_modules(recompute, modules), expert_parallel,
                                       fp8_layer, expert_tensor_parallel);
  if (recompute == Recompute::full) return std::llround(terms.bytes(layer::kFullyRecomputedLayer));
  return std::llround(terms.bytes(layer::layer_blocks(moe_layer, model.mla.enabled(), model.post_norms)));
}

Bytes recomputed_modules_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                               int tensor_parallel, bool sequence_parallel, int context_parallel,
                               RecomputeModuleMask modules, bool moe_layer, int expert_parallel, bool fp8_layer,
                               int expert_tensor_parallel) {
  const SavedTerms terms = layer_terms(model, seq_length, micro_batch_size, tensor_parallel, sequence_parallel,
                                       context_parallel, modules, expert_parallel, fp8_layer, expert_tensor_parallel);
  return std::llround(
      terms.largest_recomputed_module(layer::layer_blocks(moe_layer, model.mla.enabled(), model.post_norms)));
}

Bytes layer_backward_gradient_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                    int tensor_parallel, bool sequence_parallel, int context_parallel, bool moe_layer,
                                    int expert_parallel, int expert_tensor_parallel) {
  const SavedTerms terms = layer_terms(model, seq_length, micro_batch_size, tensor_parallel, sequence_parallel,
                                       context_parallel, {}, expert_parallel, false, expert_tensor_parallel);
  using layer::Region;
  using layer::Width;
  const bool routed = moe_layer && model.is_moe();
  const Region region = routed ? Region::routed : Region::tensor_sharded;
  const layer::SavedTensor gradients[] = {
      {"the layer output's gradient", Width::hidden, Region::sequence_sharded, 2},
      {"the activation output's gradient", routed ? Width::expert_ffn : Width::ffn, region, 2},
      {"fc1's output gradient", routed ? Width::expert_fc1 : Width::fc1, region, 2},
  };
  double total = 0;
  for (const layer::SavedTensor& gradient : gradients) total += terms.bytes(gradient);
  return std::llround(total);
}

Bytes layer_backward_held_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                                int tensor_parallel, bool sequence_parallel, int context_parallel, Recompute recompute,
                                bool moe_layer, int expert_parallel, bool fp8_layer, RecomputeModuleMask modules,
                                int expert_tensor_parallel) {
  const Bytes gradients = layer_backward_gradient_bytes(model, seq_length, micro_batch_size, tensor_parallel,
                                                        sequence_parallel, context_parallel, moe_layer,
                                                        expert_parallel, expert_tensor_parallel);
  switch (recompute) {
    case Recompute::none: return gradients;
    case Recompute::selective:
      return gradients + recomputed_modules_bytes(model, seq_length, micro_batch_size, tensor_parallel,
                                                  sequence_parallel, context_parallel, modules, moe_layer,
                                                  expert_parallel, fp8_layer, expert_tensor_parallel);
    case Recompute::full:
      return gradients + recomputed_layer_bytes(model, seq_length, micro_batch_size, tensor_parallel,
                                                sequence_parallel, context_parallel, moe_layer, expert_parallel,
                                                expert_tensor_parallel);
  }
  return gradients;
}

double backward_peak_over_live(const std::vector<double>& unit_bytes, const std::vector<double>& held_bytes) {
  double over = 0, freed = 0;
  for (std::size_t k = unit_bytes.size(); k-- > 0;) {
    over = std::max(over, held_bytes[k] - freed);
    freed += unit_bytes[k];
  }
  return over;
}

Bytes embedding_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  return std::llround(edge_terms(scenario, rows, tensor_parallel, sequence_parallel).bytes(layer::embedding_blocks()));
}

Bytes output_layer_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel,
                                    bool sequence_parallel) {
  return std::llround(edge_terms(scenario, rows, tensor_parallel, sequence_parallel).bytes(layer::head_blocks()));
}

Bytes output_layer_held_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  constexpr layer::SavedTensor kBf16BesideFp32{"bf16 logits or their gradient beside the fp32 copy", layer::Width::vocab,
                                               layer::Region::tensor_sharded, 2, layer::KeptWhen::unfused_loss};
  return std::llround(edge_terms(scenario, rows, tensor_parallel, sequence_parallel).bytes(kBf16BesideFp32));
}

// Megatron-Core's embedding_activation_buffer holds the output layer's input as the layer received it (the rank's
// rows under SP, gathered again in the drain) and grad_output_buffer the logits' gradient, bf16, of the vocabulary
// shard (megatron/core/tensor_parallel/layers.py at NVIDIA/Megatron-LM d98e8a64dd).
Bytes deferred_output_wgrad_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  constexpr layer::SavedTensor kInput{"output projection input", layer::Width::hidden, layer::Region::sequence_sharded, 2};
  constexpr layer::SavedTensor kLogitsGradient{"logits gradient", layer::Width::vocab, layer::Region::tensor_sharded, 2};
  const SavedTerms terms = edge_terms(scenario, rows, tensor_parallel, sequence_parallel);
  return std::llround(terms.bytes(kInput) + terms.bytes(kLogitsGradient));
}

Bytes mtp_edge_activation_bytes(const Scenario& scenario, double rows, int tensor_parallel, bool sequence_parallel) {
  const SavedTerms terms = edge_terms(scenario, rows, tensor_parallel, sequence_parallel);
  return std::llround(terms.bytes(layer::mtp_entry_blocks()) + terms.bytes(layer::head_blocks()));
}

Bytes recomputed_layer_bytes(const ModelConfig& model, std::int64_t seq_length, int micro_batch_size,
                             int tensor_parallel, bool sequence_parallel, int context_parallel, bool moe_layer,
                             int expert_parallel, int expert_tensor_parallel) {
  const auto layer_bytes = [&](Recompute recompute) {
    return activation_bytes_per_layer(model, seq_length, micro_batch_size, tensor_parallel, sequence_parallel,
                                      context_parallel, recompute, moe_layer, expert_parallel, false,
                                      module_bit(RecomputeModule::core_attn), expert_tensor_parallel);
  };
  return layer_bytes(Recompute::none) - layer_bytes(Recompute::full);
}

}  // namespace twin
