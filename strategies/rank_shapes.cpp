// rank_shapes (strategies/lowering_emitter.hpp): the sizes one rank of a strategy sees, from which every lowering
// derives its ops.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/moe_routing.hpp"
#include "strategies/lowering_emitter.hpp"
#include "strategies/rank_layout.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace lowering {

namespace {

// Each MoE layer's routed shapes on the busiest EP rank: its copies spread over its experts (dropless: all of them
// are computed), of which the busiest expert takes its share, and the all-to-all buffer of those copies.
std::vector<MoeLayerShapes> moe_layer_shapes(const ModelConfig& m, const RankShapes& s) {
  const double routed = static_cast<double>(s.tokens_local) * m.moe.top_k;  // this rank's copies
  const double mean_expert = routed * s.ep / s.experts_total;               // an expert's rows at the mean
  std::vector<MoeLayerShapes> shapes(static_cast<std::size_t>(m.transformer_layers()));
  const std::vector<ExpertParallelLoad> loads = layer_loads(m, s.ep, routed * s.ep);
  for (int layer = 0; layer < m.num_layers; ++layer) {
    if (!m.is_moe_layer(layer)) continue;
    const ExpertParallelLoad& load = loads[layer];
    MoeLayerShapes& x = shapes[layer];
    // Under expert TP the alltoall dispatcher gathers the copies of the etp ranks that hold the same experts.
    x.expert_tokens = s.etp * static_cast<std::int64_t>(std::ceil(mean_expert * load.rank_load));
    if (load.expert_load > load.rank_load && s.experts_local > 1)
      x.busiest_expert_tokens = s.etp * static_cast<std::int64_t>(std::ceil(mean_expert * load.expert_load));
    x.dispatch_bytes = std::llround(routed * s.h * 2 * load.rank_load);
  }
  // An MTP depth's layer routes as the decoder's last layer does (core/moe_routing.hpp draws decoder layers only).
  for (int layer = m.num_layers; layer < m.transformer_layers(); ++layer)
    shapes[static_cast<std::size_t>(layer)] = shapes[static_cast<std::size_t>(m.num_layers - 1)];
  return shapes;
}

// What the framework's switches make of the shapes (docs/FRAMEWORK.md), given the model's and the strategy's.
void set_framework_shapes(const Scenario& scenario, RankShapes& s) {
  const ModelConfig& m = scenario.model;
  // Megatron's TELinear.__init__ (megatron/core/extensions/transformer_engine.py at NVIDIA/Megatron-LM d98e8a64dd)
  // sets the shared config's tp_comm_overlap to False on meeting a buffer name other than qkv, proj, fc1 and fc2:
  // MLA's first down projection ('q_down_proj' or 'kv_down_proj') turns userbuffers off for every linear after it.
  s.tp_comm_overlap = scenario.framework.tp_comm_overlap && s.sp && !m.mla.enabled();
  s.cp_all_gather = scenario.framework.cp_comm_type == CpCommType::all_gather;
  s.gradient_accumulation_fusion = scenario.framework.gradient_accumulation_fusion;
  s.cross_entropy_loss_fusion = scenario.framework.cross_entropy_loss_fusion;
  // Post norms sit between the branch's product and the residual add: nothing to fuse there.
  s.residual_fusion = scenario.framework.residual_fusion && m.hidden_dropout == 0 && !m.post_norms;
  s.scatter_gather_p2p = scenario.framework.scatter_gather_tensors_in_pipeline && s.tp > 1 && !s.sp;
  s.deepspeed_bf16_optimizer = scenario.framework.deepspeed_bf16_optimizer && s.zero_stage == 1;
  s.deepspeed_zero3 = s.zero_stage == 3 && scenario.framework.zero_implementation == ZeroImplementation::deepspeed;
  s.reduces_every_micro_batch = zero_shards_gradients(s.zero_stage);
  s.pytorch_fsdp = pytorch_fsdp(scenario.framework.name);
  s.flat_parameters = scenario.framework.name == FrameworkName::pytorch_fsdp;
  if (s.pytorch_fsdp) {
    s.kernels = pytorch_kernels(scenario.framework);
    s.reshard_after_forward = scenario.framework.reshard_after_forward;
  }
  s.checkpoint_early_stop = recompute_stops_early(scenario.framework);
  s.reduce_bytes = gradient_reduce_bytes(scenario.framework);
  s.main_grad_bytes = main_gradient_bytes(scenario.framework);
}

// An MoE model's expert shapes, routed layers and what its framework runs around the experts.
void set_moe_shapes(const Scenario& scenario, RankShapes& s) {
  const ModelConfig& m = scenario.model;
  s.experts_total = m.moe.num_experts;
  s.experts_local = m.moe.num_experts / s.ep;
  s.top_k = m.moe.top_k;
  s.moe_ffn = m.moe.ffn_hidden_size / s.etp;  // FC1 column-parallel, FC2 row-parallel over expert TP
  s.moe_fc1_width = (s.gated() ? 2 : 1) * s.moe_ffn;
  s.shared_ffn = m.moe.shared_expert_ffn_hidden_size / s.tp;
  s.shared_fc1_width = (s.gated() ? 2 : 1) * s.shared_ffn;
  s.moe_layers = moe_layer_shapes(m, s);
  s.permute_bytes = 2 * s.tokens_local * m.moe.top_k * s.h * 2;
  s.dispatcher = scenario.framework.moe_token_dispatcher_type;
  // twin execute sends one block per (peer, local expert) so that copies arrive grouped by expert; Megatron-LM's
  // and torchtitan's all-to-all (torch's all_to_all_single with splits) one block per peer.
  const bool torch_all_to_all = scenario.framework.name == FrameworkName::megatron_core ||
                                pytorch_fsdp(scenario.framework.name);
  s.exchange_blocks_per_peer = torch_all_to_all ? 1 : static_cast<int>(s.experts_local);
  // Megatron-Core's experts run a clamped GLU's clamp and their FC2 bias as eager kernels
  // (strategies/megatron_expert_passes.hpp).
  const bool megatron = scenario.framework.name == FrameworkName::megatron_core;
  s.megatron_expert_clamp =
      megatron && s.activation == Activation::quick_geglu && m.activation_func_clamp_value > 0;
  s.megatron_expert_bias = megatron && m.add_bias_linear;
}

}  // namespace

RankShapes rank_shapes(const Scenario& scenario, const Strategy& st) {
  const ModelConfig& m = scenario.model;
  RankShapes s;
  s.tp = st.tensor_model_parallel_size;
  s.cp = st.context_parallel_size;
  s.ep = st.expert_model_parallel_size;
  s.etp = st.expert_tensor_parallel_size;
  s.pp = st.pipeline_model_parallel_size;
  s.vpp = st.virtual_pipeline_model_parallel_size;
  s.sp = st.sequence_parallel && s.tp > 1;
  s.data_group = st.data_parallel_size * s.cp;
  s.expert_data_group = expert_data_parallel_size(st);
  s.zero_stage = st.zero_stage;
  s.recompute = st.recompute;
  s.recompute_modules = recomputed_modules(st);
  s.b = st.micro_batch_size;
  s.s = scenario.training.seq_length / s.cp;
  s.tokens = s.b * s.s;
  s.tokens_local = s.sp ? s.tokens / s.tp : s.tokens;
  s.h = m.hidden_size;
  s.d = m.kv_channels > 0 ? m.kv_channels : m.hidden_size / m.num_attention_heads;
  s.heads = m.num_attention_heads / s.tp;
  s.groups = m.num_query_groups / s.tp;
  s.qkv_width = (s.heads + 2 * s.groups) * s.d;
  s.activation = m.activation;
  s.softcapped_logits = m.final_logit_softcap > 0;
  s.attention_softcap = m.attention_softcap;
  s.attention_sinks = m.attention_sinks;
  s.glu_linear_offset = m.glu_linear_offset;
  s.activation_func_clamp_value = m.activation_func_clamp_value;
  s.qk_norm = m.qk_layernorm;
  if (m.mla.enabled()) {  // each head its own key and value, d_qk = nope + rope wide, d_v = v_head_dim
    s.q_lora_rank = m.mla.q_lora_rank;
    s.kv_lora_rank = m.mla.kv_lora_rank;
    s.rope_d = m.mla.qk_pos_emb_head_dim;
    s.v_d = m.mla.v_head_dim;
    s.d = m.mla.qk_head_dim + m.mla.qk_pos_emb_head_dim;
    s.groups = s.heads;
    s.qkv_width = 0;  // no QKV linear
  }
  s.rope = m.position_embedding_rope;
  s.flash = is_fused_attention(m.attention_backend);
  s.attention_dropout = !s.flash && m.attention_dropout > 0;
  s.hidden_dropout = static_cast<float>(m.hidden_dropout);
  s.attention_dropout_probability = static_cast<float>(m.attention_dropout);
  s.cudnn_attention = m.attention_backend == AttentionBackend::fused;
  s.ffn = m.ffn_hidden_size / s.tp;
  s.fc1_width = (s.gated() ? 2 : 1) * s.ffn;
  s.vocab = padded_vocab_size(m, s.tp) / s.tp;
  if (m.is_moe()) set_moe_shapes(scenario, s);
  s.layers_per_chunk = max_layers_in_virtual_stage(m, st);
  s.normalization = m.normalization;
  set_framework_shapes(scenario, s);
  s.fp8 = scenario.training.fp8;
  s.num_layers = m.num_layers;
  return s;
}

}  // namespace lowering
}  // namespace twin
