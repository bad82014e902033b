// A scenario: the model, the training setup, the cluster, and either a search space or one pinned strategy.
// The JSON format is DESIGN.md's contract; load_scenario() validates it and reports the first error
// with file, JSON path and what was expected.
#pragma once
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster.hpp"
#include "core/model.hpp"
#include "core/strategy.hpp"

namespace twin {

struct SeqLengthBucket {
  std::int64_t max = 0;   // sequences up to this length fall in the bucket
  double fraction = 0;    // share of the sequences
  bool operator==(const SeqLengthBucket&) const = default;
};

struct TrainingConfig {
  std::int64_t seq_length = 0;
  std::int64_t global_batch_size = 0;  // sequences per iteration
  std::string precision = "bf16";      // bf16 | fp16 | fp32 (mixed precision keeps fp32 master weights)
  std::string optimizer = "adam";      // adam | sgd
  std::vector<SeqLengthBucket> seq_length_buckets;
  bool operator==(const TrainingConfig&) const = default;
};

// Every list is the set of values the search tries; a scenario may omit any (defaults: the value 1,
// or the natural default). data_parallel_size is derived per candidate.
struct SearchSpace {
  std::vector<int> tensor_model_parallel_size{1, 2, 4, 8};
  std::vector<int> pipeline_model_parallel_size{1, 2, 4, 8};
  std::vector<int> context_parallel_size{1};
  std::vector<int> expert_model_parallel_size{1};
  std::vector<int> virtual_pipeline_model_parallel_size{1, 2};
  std::vector<bool> sequence_parallel{true};
  std::vector<int> micro_batch_size{1, 2};
  std::vector<int> zero_stage{0, 1};
  std::vector<Recompute> recompute{Recompute::none, Recompute::selective, Recompute::full};
  std::vector<Schedule> schedule{Schedule::one_f_one_b, Schedule::interleaved_1f1b};
  bool per_layer = false;
  bool hot_switch = false;
  bool operator==(const SearchSpace&) const = default;
};

struct Scenario {
  std::string name;
  std::string source;             // file it came from (for messages)
  ModelConfig model;
  TrainingConfig training;
  Cluster cluster;
  SearchSpace search;
  std::optional<Strategy> strategy;  // pinned: simulate exactly this one
  std::string profile = "builtin";
  bool operator==(const Scenario&) const = default;
};

// Throws InputError naming the file, JSON path and expectation.
// A scenario may give both `strategy` and `search`: the pinned strategy wins and the search space is
// kept only for to_json(). `strategy.pipelines` and search.per_layer / hot_switch = true are rejected
// (heterogeneous plans, per-layer and hot-switching search are not implemented in this version).
Scenario load_scenario(const std::filesystem::path& path);
Scenario parse_scenario(const nlohmann::json& document, const std::string& source);
// Parses text (for the fuzzer and tests); malformed JSON is an InputError too.
Scenario parse_scenario_text(const std::string& text, const std::string& source);
// The resolved scenario (presets expanded), for best.json; parse_scenario(to_json(s)) == s.
nlohmann::json to_json(const Scenario& scenario);
nlohmann::json to_json(const Strategy& strategy);

}  // namespace twin
