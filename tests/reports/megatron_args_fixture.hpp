// What the tests of megatron_args.txt share: the pinned strategy as the search completes it, the file's argument and
// comment lines, a Llama-like scenario of 16 H100s (TP 2, PP 2 interleaved, SP, ZeRO 1, selective recompute) and a
// GPT-like one.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin::testing {

// The pinned strategy, completed (data-parallel size and micro-batches derived) as the search completes it.
inline Strategy pinned(const Scenario& scenario) {
  std::vector<Candidate> candidates = enumerate_candidates(scenario);
  EXPECT_EQ(candidates.size(), 1u);
  EXPECT_TRUE(candidates.front().infeasible_reason.empty()) << candidates.front().infeasible_reason;
  return candidates.front().strategy;
}

inline std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The argument lines only (comments dropped), in order.
inline std::vector<std::string> arguments(const std::string& text) {
  std::vector<std::string> args;
  for (const std::string& line : lines_of(text))
    if (line.rfind("#", 0) != 0) args.push_back(line);
  return args;
}

inline std::vector<std::string> comments(const std::string& text) {
  std::vector<std::string> notes;
  for (const std::string& line : lines_of(text))
    if (line.rfind("#", 0) == 0) notes.push_back(line);
  return notes;
}

inline bool has_comment_with(const std::string& text, const std::string& words) {
  for (const std::string& line : comments(text))
    if (line.find(words) != std::string::npos) return true;
  return false;
}

inline constexpr const char* kLlamaScenario = R"({
  "name": "llama2-7b on 2x8 H100",
  "model": { "preset": "llama2-7b" },
  "training": { "seq_length": 4096, "global_batch_size": 64 },
  "cluster": { "nodes": [ { "count": 2, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 400 } } ] },
  "strategy": { "tensor_model_parallel_size": 2, "pipeline_model_parallel_size": 2,
                "virtual_pipeline_model_parallel_size": 2, "sequence_parallel": true, "micro_batch_size": 1,
                "zero_stage": 1, "recompute": "selective", "schedule": "interleaved-1f1b" }
})";

inline bool has_argument(const std::string& text, const std::string& argument) {
  for (const std::string& line : arguments(text))
    if (line == argument) return true;
  return false;
}

inline constexpr const char* kGptScenario = R"({
  "name": "GPT 18.4B on 8x8 A100",
  "model": { "preset": "megatron-gpt-18.4b" },
  "training": { "seq_length": 2048, "global_batch_size": 1024, "precision": "fp16" },
  "framework": { "overlap_grad_reduce": false, "overlap_param_gather": false,
                 "gradient_accumulation_fusion": false, "cross_entropy_loss_fusion": false,
                 "attention_backend": "unfused" },
  "cluster": { "nodes": [ { "count": 8, "gpu": "A100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 200 } } ] },
  "strategy": { "tensor_model_parallel_size": 8, "pipeline_model_parallel_size": 2, "sequence_parallel": false,
                "micro_batch_size": 1, "zero_stage": 0, "recompute": "full", "schedule": "1f1b" }
})";

}  // namespace twin::testing
