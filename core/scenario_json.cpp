// Scenario -> JSON, fully resolved (presets expanded, defaults written), so that best.json is
// self-contained and parse_scenario(to_json(s)) gives s back.
#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "core/scenario_pipelines.hpp"

namespace twin {

namespace {

using nlohmann::json;

// The router's keys where they are not MoeConfig's defaults: a softmax router's scenario reads as before.
void router_json(const MoeConfig& moe, json& out) {
  const MoeConfig defaults;
  if (moe.router_score_function != defaults.router_score_function)
    out["router_score_function"] = to_string(moe.router_score_function);
  if (moe.router_pre_softmax) out["router_pre_softmax"] = true;
  if (moe.router_topk_scaling_factor != defaults.router_topk_scaling_factor) out["router_topk_scaling_factor"] = moe.router_topk_scaling_factor;
  if (moe.router_expert_bias) out["router_expert_bias"] = true;
  if (moe.router_bias_update_rate != defaults.router_bias_update_rate) out["router_bias_update_rate"] = moe.router_bias_update_rate;
  if (moe.router_num_groups > 0) out["router_num_groups"] = moe.router_num_groups;
  if (moe.router_group_topk > 0) out["router_group_topk"] = moe.router_group_topk;
  if (moe.aux_loss_coeff != defaults.aux_loss_coeff) out["aux_loss_coeff"] = moe.aux_loss_coeff;
}

json model_json(const ModelConfig& m) {
  json out = {
      {"name", m.name},
      {"num_layers", m.num_layers},
      {"hidden_size", m.hidden_size},
      {"ffn_hidden_size", m.ffn_hidden_size},
      {"num_attention_heads", m.num_attention_heads},
      {"num_query_groups", m.num_query_groups},
      {"kv_channels", m.kv_channels},
      {"vocab_size", m.vocab_size},
      {"max_position_embeddings", m.max_position_embeddings},
      {"activation", to_string(m.activation)},
      {"normalization", to_string(m.normalization)},
      {"attention_backend", to_string(m.attention_backend)},
      {"untie_embeddings_and_output_weights", m.untie_embeddings_and_output_weights},
      {"position_embedding_rope", m.position_embedding_rope},
      {"rotary_base", m.rotary_base},
      {"add_bias_linear", m.add_bias_linear},
      {"hidden_dropout", m.hidden_dropout},
      {"attention_dropout", m.attention_dropout},
  };
  if (m.is_moe())
    out["moe"] = {{"num_experts", m.moe.num_experts},
                  {"top_k", m.moe.top_k},
                  {"ffn_hidden_size", m.moe.ffn_hidden_size},
                  {"layer_freq", m.moe.layer_freq}};
  if (m.is_moe() && m.moe.routing_imbalance) out["moe"]["routing_imbalance"] = *m.moe.routing_imbalance;
  if (m.is_moe() && m.moe.routing) out["moe"]["routing"] = routing_json(*m.moe.routing);
  // The variants of 2025-26, written only when set: a classic model's best.json reads as before.
  if (m.is_moe() && m.moe.first_dense_layers > 0) out["moe"]["first_dense_layers"] = m.moe.first_dense_layers;
  if (m.is_moe() && m.moe.shared_expert_ffn_hidden_size > 0)
    out["moe"]["shared_expert_ffn_hidden_size"] = m.moe.shared_expert_ffn_hidden_size;
  if (m.is_moe() && m.moe.expert_capacity_factor) out["moe"]["expert_capacity_factor"] = *m.moe.expert_capacity_factor;
  if (m.is_moe() && m.moe.pad_expert_input_to_capacity) out["moe"]["pad_expert_input_to_capacity"] = true;
  if (m.is_moe()) router_json(m.moe, out["moe"]);
  if (m.mla.enabled())
    out["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                  {"kv_lora_rank", m.mla.kv_lora_rank},
                  {"qk_head_dim", m.mla.qk_head_dim},
                  {"qk_pos_emb_head_dim", m.mla.qk_pos_emb_head_dim},
                  {"v_head_dim", m.mla.v_head_dim}};
  if (m.qk_layernorm) out["qk_layernorm"] = true;
  if (m.window_size > 0) out["window_size"] = m.window_size;
  if (m.window_attn_skip_freq > 0) out["window_attn_skip_freq"] = m.window_attn_skip_freq;
  if (m.attention_sinks) out["attention_sinks"] = true;
  if (m.attention_softcap > 0) out["attention_softcap"] = m.attention_softcap;
  if (m.final_logit_softcap > 0) out["final_logit_softcap"] = m.final_logit_softcap;
  if (m.post_norms) out["post_norms"] = true;
  if (m.mtp_num_layers > 0) out["mtp_num_layers"] = m.mtp_num_layers;
  if (m.glu_linear_offset != 0) out["glu_linear_offset"] = m.glu_linear_offset;
  if (m.activation_func_clamp_value > 0) out["activation_func_clamp_value"] = m.activation_func_clamp_value;
  return out;
}

json training_json(const TrainingConfig& t) {
  json out = {{"seq_length", t.seq_length},
              {"global_batch_size", t.global_batch_size},
              {"precision", t.precision},
              {"optimizer", t.optimizer}};
  if (!t.optimizer_precision.is_default()) {  // written only when set: older readers see the same scenario
    out["main_params_dtype"] = to_string(t.optimizer_precision.main_params);
    out["exp_avg_dtype"] = to_string(t.optimizer_precision.exp_avg);
    out["exp_avg_sq_dtype"] = to_string(t.optimizer_precision.exp_avg_sq);
    if (t.optimizer_precision.store_param_remainders) out["store_param_remainders"] = true;
  }
  if (!t.recipe.is_default()) {  // written only when set: scenarios without a recipe keep their bytes
    const TrainingRecipe& r = t.recipe;
    out["lr"] = r.lr;
    out["min_lr"] = r.min_lr;
    out["lr_warmup_iters"] = r.lr_warmup_iters;
    if (r.lr_decay_iters) out["lr_decay_iters"] = *r.lr_decay_iters;
    out["lr_decay_style"] = to_string(r.lr_decay_style);
    out["clip_grad"] = r.clip_grad;
  }
  if (t.fp8) {  // written only when set: scenarios without FP8 keep their bytes
    const Fp8Config& f = *t.fp8;
    out["fp8"] = {{"format", to_string(f.format)}, {"recipe", to_string(f.recipe)},
                  {"param_gather", f.param_gather}, {"wgrad", f.wgrad},
                  {"first_last_layers_bf16", f.first_last_layers_bf16}};
    if (f.recipe == Fp8Recipe::delayed) out["fp8"]["amax_history_len"] = f.amax_history_len;
    if (f.first_last_layers_bf16) {
      out["fp8"]["num_layers_at_start_in_bf16"] = f.num_layers_at_start_in_bf16;
      out["fp8"]["num_layers_at_end_in_bf16"] = f.num_layers_at_end_in_bf16;
    }
  }
  if (!t.seq_length_buckets.empty()) {
    json buckets = json::array();
    for (const SeqLengthBucket& b : t.seq_length_buckets) buckets.push_back({{"max", b.max}, {"fraction", b.fraction}});
    out["seq_length_buckets"] = buckets;
  }
  if (!t.seq_length_histogram.empty()) {
    json bars = json::array();
    for (const SeqLengthCount& bar : t.seq_length_histogram) bars.push_back({bar.length, bar.count});
    out["seq_length_histogram"] = bars;
  }
  return out;
}

json framework_json(const FrameworkConfig& f) {
  json out = {{"overlap_grad_reduce", f.overlap_grad_reduce},
              {"overlap_param_gather", f.overlap_param_gather},
              {"tp_comm_overlap", f.tp_comm_overlap},
              {"gradient_accumulation_fusion", f.gradient_accumulation_fusion},
              {"cross_entropy_loss_fusion", f.cross_entropy_loss_fusion},
              {"residual_fusion", f.residual_fusion},
              {"cp_comm_type", f.cp_comm_type == CpCommType::p2p ? "p2p" : "all_gather"}};
  if (f.use_distributed_optimizer) out["use_distributed_optimizer"] = *f.use_distributed_optimizer;
  if (f.name) out["name"] = std::string(to_string(*f.name));
  // Written only when not the default, so that plans of Megatron-style runs keep their bytes.
  if (f.zero_implementation == ZeroImplementation::deepspeed) out["zero_implementation"] = "deepspeed";
  if (f.moe_token_dispatcher_type == MoeTokenDispatcher::allgather) out["moe_token_dispatcher_type"] = "allgather";
  if (f.moe_token_dispatcher_type == MoeTokenDispatcher::flex) out["moe_token_dispatcher_type"] = "flex";
  if (f.overlap_moe_expert_parallel_comm) out["overlap_moe_expert_parallel_comm"] = true;
  if (f.delay_wgrad_compute) out["delay_wgrad_compute"] = true;
  if (f.scatter_gather_tensors_in_pipeline) out["scatter_gather_tensors_in_pipeline"] = true;
  if (f.defer_embedding_wgrad_compute) {
    out["defer_embedding_wgrad_compute"] = true;
    out["wgrad_deferral_limit"] = f.wgrad_deferral_limit;
  }
  if (f.deepspeed_bf16_optimizer) out["deepspeed_bf16_optimizer"] = true;
  if (pytorch_fsdp(f.name)) {
    out["compile"] = f.compile;
    out["reshard_after_forward"] = f.reshard_after_forward;
    // Written where true, so that the plans of before keep their bytes.
    if (f.transformer_engine_kernels) out["transformer_engine_kernels"] = true;
  }
  // Written where stated (a pytorch-fsdp2 scenario always states it), so that other plans keep their bytes.
  if (f.reduce_dtype_bytes) out["reduce_dtype"] = *f.reduce_dtype_bytes == 4 ? "float32" : "bfloat16";
  if (f.main_grad_dtype_bytes) out["main_grad_dtype"] = *f.main_grad_dtype_bytes == 4 ? "float32" : "bfloat16";
  if (f.checkpoint_early_stop) out["checkpoint_early_stop"] = *f.checkpoint_early_stop;
  return out;
}

json gpu_json(const GpuSpec& g) {
  json out = {{"name", g.name},
          {"peak_bf16_tflops", g.peak_bf16_tflops},
          {"peak_fp32_tflops", g.peak_fp32_tflops},
          {"memory_GiB", g.memory_GiB},
          {"hbm_bandwidth_GBps", g.hbm_bandwidth_GBps},
          {"nvlink_bandwidth_GBps", g.nvlink_bandwidth_GBps},
          {"pcie_bandwidth_GBps", g.pcie_bandwidth_GBps},
          {"sm_count", g.sm_count}};
  // Written only when the GPU has FP8 tensor cores (or MXFP8), so that GPUs without keep their bytes.
  if (g.peak_fp8_tflops > 0) out["peak_fp8_tflops"] = g.peak_fp8_tflops;
  if (g.mxfp8) out["mxfp8"] = true;
  return out;
}

json cluster_json(const Cluster& c) {
  json nodes = json::array();
  for (const NodeGroup& g : c.node_groups) {
    nodes.push_back({{"count", g.count},
                     {"gpu", gpu_json(g.gpu)},
                     {"gpus_per_node", g.gpus_per_node},
                     {"intra_node",
                      {{"kind", to_string(g.intra_node.kind)},
                       {"bandwidth_GBps", g.intra_node.bandwidth_GBps},
                       {"latency_us", g.intra_node.latency_us}}},
                     {"nics",
                      {{"count", g.nics.count},
                       {"bandwidth_Gbps", g.nics.bandwidth_Gbps},
                       {"latency_us", g.nics.latency_us}}}});
    if (g.nvlink_domain_gpus > 0) nodes.back()["nvlink_domain_gpus"] = g.nvlink_domain_gpus;
  }
  return {{"nodes", nodes},
          {"network", {{"topology", c.network.topology}, {"oversubscription", c.network.oversubscription}}}};
}

template <typename T, typename Name>
json named_list(const std::vector<T>& values, Name name) {
  json out = json::array();
  for (const T& v : values) out.push_back(name(v));
  return out;
}

json search_json(const SearchSpace& s) {
  auto bools = json::array();
  for (bool b : s.sequence_parallel) bools.push_back(b);
  json out = {{"tensor_model_parallel_size", s.tensor_model_parallel_size},
          {"pipeline_model_parallel_size", s.pipeline_model_parallel_size},
          {"context_parallel_size", s.context_parallel_size},
          {"expert_model_parallel_size", s.expert_model_parallel_size},
          {"virtual_pipeline_model_parallel_size", s.virtual_pipeline_model_parallel_size},
          {"sequence_parallel", bools},
          {"micro_batch_size", s.micro_batch_size},
          {"zero_stage", s.zero_stage},
          {"recompute", named_list(s.recompute, [](Recompute r) { return to_string(r); })},
          {"schedule", named_list(s.schedule, [](Schedule x) { return to_string(x); })},
          {"per_layer", s.per_layer},
          {"hot_switch", s.hot_switch}};
  // Written only where it is not the default, so that the scenario of a plan without expert TP stays byte for byte.
  if (s.expert_tensor_parallel_size != std::vector<int>{1}) out["expert_tensor_parallel_size"] = s.expert_tensor_parallel_size;
  return out;
}

}  // namespace

json to_json(const Strategy& s) {
  json out = {{"tensor_model_parallel_size", s.tensor_model_parallel_size},
          {"pipeline_model_parallel_size", s.pipeline_model_parallel_size},
          {"context_parallel_size", s.context_parallel_size},
          {"expert_model_parallel_size", s.expert_model_parallel_size},
          {"data_parallel_size", s.data_parallel_size},
          {"virtual_pipeline_model_parallel_size", s.virtual_pipeline_model_parallel_size},
          {"sequence_parallel", s.sequence_parallel},
          {"micro_batch_size", s.micro_batch_size},
          {"num_micro_batches", s.num_micro_batches},
          {"zero_stage", s.zero_stage},
          {"recompute", to_string(s.recompute)},
          {"schedule", to_string(s.schedule)}};
  if (!s.pipeline_model_parallel_layout.empty())
    out["pipeline_model_parallel_layout"] = s.pipeline_model_parallel_layout.text;
  if (s.expert_tensor_parallel_size != 1) out["expert_tensor_parallel_size"] = s.expert_tensor_parallel_size;
  if (!s.recompute_modules.empty())
    out["recompute_modules"] = named_list(s.recompute_modules, [](RecomputeModule m) { return to_string(m); });
  return out;
}

json to_json(const Scenario& s) {
  json out = {{"name", s.name},
          {"model", model_json(s.model)},
          {"training", training_json(s.training)},
          {"framework", framework_json(s.framework)},
          {"cluster", cluster_json(s.cluster)},
          {"search", search_json(s.search)},
          {"strategy", !s.strategy ? json(nullptr)
                       : s.pipelines.empty()
                           ? to_json(*s.strategy)
                           : asymmetric_strategy_json(*s.strategy, s.pipelines)},
          {"profile", s.profile}};
  if (s.per_layer_plan) out["strategy"] = {{"per_layer", json::parse(s.per_layer_plan->json)}};
  if (s.hot_switch_plan) out["strategy"] = {{"hot_switch", json::parse(s.hot_switch_plan->json)}};
  if (s.profile_scaling) out["profile_scaling"] = true;
  return out;
}

}  // namespace twin
