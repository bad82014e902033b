// A scenario: the model, the training setup, the cluster, and either a search space or one pinned strategy.
// The JSON format is DESIGN.md's contract; load_scenario() validates it and reports the first error
// with file, JSON path and what was expected.
#pragma once
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/cluster.hpp"
#include "core/fp8.hpp"
#include "core/framework.hpp"
#include "core/model.hpp"
#include "core/optimizer_precision.hpp"
#include "core/training_recipe.hpp"
#include "core/strategy.hpp"

namespace twin {

struct SeqLengthBucket {
  std::int64_t max = 0;   // sequences up to this length fall in the bucket
  double fraction = 0;    // share of the sequences
  bool operator==(const SeqLengthBucket&) const = default;
};

// One bar of a sequence-length histogram: `count` sequences of `length` tokens (relative counts).
struct SeqLengthCount {
  std::int64_t length = 0;
  std::int64_t count = 0;
  bool operator==(const SeqLengthCount&) const = default;
};

// A histogram's bars, read once and shared by every copy of the scenario (the hot-switching search copies it per
// phase and length range): copying one costs a pointer, whatever its millions of bars. Immutable.
class SeqLengthHistogram {
 public:
  SeqLengthHistogram() = default;
  SeqLengthHistogram(std::vector<SeqLengthCount> bars)  // NOLINT: a histogram is its bars
      : bars_(std::make_shared<const std::vector<SeqLengthCount>>(std::move(bars))) {}
  SeqLengthHistogram(std::initializer_list<SeqLengthCount> bars) : SeqLengthHistogram(std::vector(bars)) {}

  const std::vector<SeqLengthCount>& bars() const { return bars_ ? *bars_ : none(); }
  bool empty() const { return bars().empty(); }
  std::size_t size() const { return bars().size(); }
  auto begin() const { return bars().begin(); }
  auto end() const { return bars().end(); }
  bool operator==(const SeqLengthHistogram& other) const { return bars_ == other.bars_ || bars() == other.bars(); }
  bool operator==(const std::vector<SeqLengthCount>& other) const { return bars() == other; }

 private:
  static const std::vector<SeqLengthCount>& none() {
    static const std::vector<SeqLengthCount> empty;
    return empty;
  }
  std::shared_ptr<const std::vector<SeqLengthCount>> bars_;
};

struct TrainingConfig {
  std::int64_t seq_length = 0;
  std::int64_t global_batch_size = 0;  // sequences per iteration
  std::string precision = "bf16";      // bf16 | fp16 | fp32 (mixed precision keeps fp32 master weights)
  std::string optimizer = "adam";      // adam | sgd
  OptimizerPrecision optimizer_precision;  // main_params_dtype, exp_avg_dtype, exp_avg_sq_dtype (fp32 default)
  // training.fp8: the transformer layers' linears in FP8 through Transformer Engine (core/fp8.hpp); none when absent.
  std::optional<Fp8Config> fp8;
  // The learning-rate schedule and clipping twin execute runs (core/training_recipe.hpp); no simulation input.
  TrainingRecipe recipe;
  std::vector<SeqLengthBucket> seq_length_buckets;
  // training.seq_length_histogram: inline [[length, count], ...] or a JSON/CSV file of such pairs (relative
  // to the scenario's folder), loaded here; lengths increasing, at most seq_length. Not with buckets.
  SeqLengthHistogram seq_length_histogram;
  bool operator==(const TrainingConfig&) const = default;
};

// Every list is the set of values the search tries; a scenario may omit any (defaults: the value 1,
// or the natural default). data_parallel_size is derived per candidate.
struct SearchSpace {
  std::vector<int> tensor_model_parallel_size{1, 2, 4, 8};
  std::vector<int> pipeline_model_parallel_size{1, 2, 4, 8};
  std::vector<int> context_parallel_size{1};
  std::vector<int> expert_model_parallel_size{1};
  std::vector<int> expert_tensor_parallel_size{1};  // Megatron's --expert-tensor-parallel-size (default TP there)
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

// One stage of an asymmetric pipeline (strategy.pipelines[p].stages[s]): one tensor-parallel group.
// `devices` are global GPU indices: GPUs are numbered node group by node group, node by node, in the
// order of cluster.nodes (the scenario may also write them {"node_group": g, "first": j, "count": k}).
struct AsymmetricStage {
  std::vector<int> devices;
  int tensor_model_parallel_size = 1;  // = devices.size()
  int num_layers = 0;                  // consecutive layers, after the previous stage's
  bool operator==(const AsymmetricStage&) const = default;
};

// One pipeline of an asymmetric plan: a data-parallel replica with its own batch share
// (micro_batch_size * num_micro_batches sequences) and its own stages.
struct AsymmetricPipeline {
  int micro_batch_size = 1;
  int num_micro_batches = 1;
  std::vector<AsymmetricStage> stages;
  bool operator==(const AsymmetricPipeline&) const = default;
};

struct Scenario {
  std::string name;
  std::string source;             // file it came from (for messages)
  ModelConfig model;
  TrainingConfig training;
  FrameworkConfig framework;
  Cluster cluster;
  SearchSpace search;
  std::optional<Strategy> strategy;  // pinned: simulate exactly this one
  // strategy.pipelines: a fixed asymmetric plan (HexiScale). `strategy` then holds the fields its
  // pipelines share (sequence_parallel, recompute, schedule, zero_stage).
  std::vector<AsymmetricPipeline> pipelines;
  // A fixed family plan, written as best.json's family_plan.detail, kept as compact JSON with its JSON path in
  // `source`; `strategy` stays empty and the search is not run. strategy.per_layer: a per-layer plan (Galvatron),
  // read by strategies/per_layer (read_per_layer_detail); strategy.hot_switch: a hot-switching plan (HotSPa),
  // read by strategies/hot_switch (read_hot_switch_detail).
  struct PinnedPlan {
    std::string json, at;
    bool operator==(const PinnedPlan&) const = default;
  };
  std::optional<PinnedPlan> per_layer_plan, hot_switch_plan;
  bool pins_family_plan() const { return per_layer_plan || hot_switch_plan; }
  // A per-layer, hot-switching or asymmetric plan, pinned or searched for: the families with lowerings of their own,
  // which a switch modelled in Megatron's schedules only refuses.
  bool plans_families() const {
    return pins_family_plan() || !pipelines.empty() || search.per_layer || search.hot_switch;
  }
  std::string profile = "builtin";
  // GPUs the profile does not describe are priced from another GPU's measurements scaled by datasheet ratios
  // (cost/profile.hpp profile_for_cluster); false: they are an error. `twin simulate --scale-profile`.
  bool profile_scaling = false;
  // Set by twin simulate from the profile it loaded, never read from the file: which framework's kernels on which
  // GPUs the times are (cost/profile.hpp profile_workload), for the report's "workload" line and warning.
  std::string profile_workload;
  std::optional<FrameworkName> profile_framework;
  bool operator==(const Scenario&) const = default;
};

// Throws InputError naming the file, JSON path and expectation.
// A scenario may give both `strategy` and `search`: the pinned strategy wins and the search space is
// kept only for to_json(). search.per_layer = true adds per-layer hybrid plans (Galvatron-style,
// strategies/per_layer/) to the search. search.hot_switch = true needs a length distribution
// (seq_length_buckets or seq_length_histogram), a dense model and at most 64 GPUs. `strategy.pipelines` is checked against
// the model, batch and cluster (core/scenario_pipelines.hpp).
Scenario load_scenario(const std::filesystem::path& path);
// `json_path`: where the scenario sits in its file (a row of a validation table), for messages.
Scenario parse_scenario(const nlohmann::json& document, const std::string& source, const std::string& json_path = "");
// Parses text (for the fuzzer and tests); malformed JSON is an InputError too.
Scenario parse_scenario_text(const std::string& text, const std::string& source);
// The resolved scenario (presets expanded), for best.json; parse_scenario(to_json(s)) == s.
nlohmann::json to_json(const Scenario& scenario);
nlohmann::json to_json(const Strategy& strategy);

}  // namespace twin
