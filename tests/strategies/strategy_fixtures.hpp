// Scenarios for the strategies tests, built in C++: a GPT-shaped model (Korthikanti et al.'s setting),
// Llama-shaped ones from the presets, and homogeneous clusters of 8-GPU nodes.
#pragma once
#include <cstdint>

#include "core/scenario.hpp"

namespace twin::testing {

// GPT as in Korthikanti et al. 2022: GeLU MLP of 4h, LayerNorm, unfused attention with dropout, MHA.
inline ModelConfig gpt_shaped() {
  ModelConfig m;
  m.name = "gpt-shaped";
  m.num_layers = 8;
  m.hidden_size = 2048;
  m.ffn_hidden_size = 4 * 2048;
  m.num_attention_heads = 16;
  m.num_query_groups = 16;
  m.kv_channels = 128;
  m.vocab_size = 51200;
  m.max_position_embeddings = 2048;
  m.activation = Activation::gelu;
  m.normalization = Normalization::layernorm;
  m.attention_backend = AttentionBackend::unfused;
  m.untie_embeddings_and_output_weights = false;
  m.position_embedding_rope = false;
  m.hidden_dropout = 0.1;
  m.attention_dropout = 0.1;
  return m;
}

// Llama-shaped (SwiGLU, RMSNorm, RoPE, flash attention, untied), small enough for fast lowering.
inline ModelConfig llama_shaped(int layers = 8) {
  ModelConfig m;
  m.name = "llama-shaped";
  m.num_layers = layers;
  m.hidden_size = 1024;
  m.ffn_hidden_size = 2816;
  m.num_attention_heads = 16;
  m.num_query_groups = 4;
  m.kv_channels = 64;
  m.vocab_size = 32000;
  m.max_position_embeddings = 4096;
  return m;
}

inline ModelConfig moe_shaped() {
  ModelConfig m = llama_shaped(4);
  m.moe.num_experts = 8;
  m.moe.top_k = 2;
  m.moe.ffn_hidden_size = 1408;
  m.moe.layer_freq = 1;
  return m;
}

inline Cluster h100_nodes(int nodes, double peak_tflops = 989.4) {
  NodeGroup group;
  group.count = nodes;
  group.gpus_per_node = 8;
  group.gpu.name = "H100-SXM-80GB";
  group.gpu.peak_bf16_tflops = peak_tflops;
  group.gpu.memory_GiB = 79.6;
  group.intra_node = {IntraNodeKind::nvswitch, 450, 2};
  group.nics = {8, 400, 3};
  Cluster cluster;
  cluster.node_groups.push_back(group);
  return cluster;
}

inline Scenario make_scenario(const ModelConfig& model, int nodes, std::int64_t seq_length, std::int64_t global_batch) {
  Scenario s;
  s.name = model.name;
  s.model = model;
  s.training.seq_length = seq_length;
  s.training.global_batch_size = global_batch;
  s.cluster = h100_nodes(nodes);
  return s;
}

inline Strategy make_strategy(int tp, int pp, int cp = 1, bool sp = true, int vpp = 1,
                              Schedule schedule = Schedule::one_f_one_b) {
  Strategy s;
  s.tensor_model_parallel_size = tp;
  s.pipeline_model_parallel_size = pp;
  s.context_parallel_size = cp;
  s.sequence_parallel = sp;
  s.virtual_pipeline_model_parallel_size = vpp;
  s.schedule = schedule;
  return s;
}

}  // namespace twin::testing
