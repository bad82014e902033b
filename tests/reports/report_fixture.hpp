// Hand-built scenario and candidates for the report tests: two feasible candidates (the best one with
// the two-stage graph's timings), one out of memory and one invalid, with every number set by hand.
#pragma once
#include <string>
#include <vector>

#include "core/scenario.hpp"
#include "strategies/search.hpp"
#include "tests/traces/two_stage_graph.hpp"

namespace twin::testing {

// How many times `needle` occurs in `text`, not overlapping (elements of a report, rows of a table).
inline std::size_t count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + needle.size())) ++n;
  return n;
}

inline Scenario small_scenario() {
  Scenario scenario;
  scenario.name = "llama-ish on 1x8 H100";
  scenario.model.name = "tiny-llama";
  scenario.model.num_layers = 2;
  scenario.model.hidden_size = 4096;
  scenario.model.ffn_hidden_size = 11008;
  scenario.model.num_attention_heads = 32;
  scenario.model.num_query_groups = 32;
  scenario.model.kv_channels = 128;
  scenario.model.vocab_size = 32000;
  scenario.model.max_position_embeddings = 4096;
  scenario.training.seq_length = 4096;
  scenario.training.global_batch_size = 16;
  NodeGroup group;
  group.count = 1;
  group.gpus_per_node = 8;
  group.gpu.name = "H100-SXM-80GB";
  group.gpu.peak_bf16_tflops = 989;
  group.gpu.memory_GiB = 79.6;
  group.intra_node = {IntraNodeKind::nvswitch, 450, 0};
  group.nics = {8, 400, 0};
  scenario.cluster.node_groups = {group};
  scenario.profile = "builtin";
  return scenario;
}

inline Strategy strategy(int tp, int pp, int dp, int micro_batch_size, Schedule schedule) {
  Strategy s;
  s.tensor_model_parallel_size = tp;
  s.pipeline_model_parallel_size = pp;
  s.data_parallel_size = dp;
  s.sequence_parallel = tp > 1;
  s.micro_batch_size = micro_batch_size;
  s.num_micro_batches = 16 / (micro_batch_size * dp);
  s.schedule = schedule;
  return s;
}

inline MemoryBreakdown memory(double parameters_GiB, double activations_GiB) {
  MemoryBreakdown m;
  m.parameters = static_cast<Bytes>(parameters_GiB * kGiB);
  m.gradients = m.parameters;
  m.optimizer_states = 6 * m.parameters;
  m.activations = static_cast<Bytes>(activations_GiB * kGiB);
  m.communication_buffers = static_cast<Bytes>(0.5 * kGiB);
  m.workspace = static_cast<Bytes>(1.0 * kGiB);
  return m;
}

// The best candidate: tp2.pp2.dp2, 7000 ns iteration (compute 2001, exposed comm 500, bubble 3500, optimizer 999).
inline Candidate best_candidate() {
  Candidate c;
  c.strategy = strategy(2, 2, 2, 1, Schedule::one_f_one_b);
  c.feasible = true;
  c.memory.per_stage = {memory(2.0, 20.0), memory(2.0, 10.0)};
  c.memory.worst_stage = 0;
  c.result = two_stage_result();
  c.throughput = {7e-6, 1234567.891, 0.4312, 0.5126};
  return c;
}

inline std::vector<Candidate> ranked_candidates() {
  std::vector<Candidate> ranked = {best_candidate()};

  Candidate second;
  second.strategy = strategy(4, 2, 1, 2, Schedule::gpipe);
  second.feasible = true;
  second.memory.per_stage = {memory(1.0, 30.0), memory(1.0, 25.0)};
  second.result.iteration_ns = 9600;
  second.result.breakdown = {2100, 2500, 4000, 1000};
  second.throughput = {9.6e-6, 909090.5, 0.3177, 0.3177};
  ranked.push_back(second);

  Candidate out_of_memory;
  out_of_memory.strategy = strategy(1, 1, 8, 2, Schedule::one_f_one_b);
  out_of_memory.memory.per_stage = {memory(12.0, 40.0)};
  out_of_memory.infeasible_reason = "out of memory: 137.5 GiB > 79.6 GiB on stage 0";
  ranked.push_back(out_of_memory);

  Candidate invalid;
  invalid.strategy = strategy(8, 4, 1, 1, Schedule::interleaved_1f1b);
  invalid.infeasible_reason = "tensor_model_parallel_size \"8\" x pipeline 4 > 8 GPUs, <not> valid";
  ranked.push_back(invalid);
  return ranked;
}

}  // namespace twin::testing
