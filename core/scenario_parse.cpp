// Scenario JSON -> Scenario: presets fill absent fields, explicit fields win, and the first bad value
// stops the parse with its file, JSON path and expectation. The format is DESIGN.md's "Scenario (JSON)".
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/cluster_parse.hpp"
#include "core/error.hpp"
#include "core/input_file.hpp"
#include "core/json_reader.hpp"
#include "core/model_limits.hpp"
#include "core/scenario.hpp"
#include "core/scenario_cost.hpp"
#include "core/scenario_framework.hpp"
#include "core/scenario_fp8.hpp"
#include "core/scenario_histogram.hpp"
#include "core/scenario_model.hpp"
#include "core/scenario_pipelines.hpp"
#include "core/scenario_recompute.hpp"
#include "core/scenario_sweep.hpp"

namespace twin {

namespace {

using Reader = JsonReader;

// Upper bounds keep every derived count (parameters, FLOPs, bytes) far inside 64-bit integers (the model's
// in core/model_limits.hpp).
constexpr std::int64_t kMaxBatch = 1 << 24;
constexpr std::int64_t kMaxParallelSize = 1 << 16;
// The search enumerates every combination of its lists before pruning: beyond this, memory and time run away.
constexpr std::int64_t kMaxSearchCombinations = 200000;

// Megatron's choices: main parameters fp32 or fp16 (and bf16 here: no master copy), moments fp32, bf16, fp16 or
// fp8. fp32 training keeps its fp32 weights as the main parameters; SGD has no second moment.
OptimizerPrecision parse_optimizer_precision(const Reader& r, const TrainingConfig& t) {
  OptimizerPrecision p;
  const auto dtype = [&](const char* key, const std::vector<std::string>& choices) {
    return *state_dtype_from_string(r.find(key)->one_of(choices, key));
  };
  if (r.find("main_params_dtype")) {
    p.main_params = dtype("main_params_dtype", {"fp32", "fp16", "bf16"});
    if (t.precision == "fp32" && p.main_params != StateDtype::fp32)
      r.find("main_params_dtype")->fail("expected fp32: fp32 training updates its fp32 weights themselves");
  }
  if (r.find("exp_avg_dtype")) p.exp_avg = dtype("exp_avg_dtype", {"fp32", "bf16", "fp16", "fp8"});
  if (r.find("exp_avg_sq_dtype")) {
    p.exp_avg_sq = dtype("exp_avg_sq_dtype", {"fp32", "bf16", "fp16", "fp8"});
    if (t.optimizer == "sgd" && p.exp_avg_sq != StateDtype::fp32)
      r.find("exp_avg_sq_dtype")->fail("no exp_avg_sq_dtype with SGD (it keeps one moment, exp_avg)");
  }
  if (const auto remainders = r.find("store_param_remainders")) {
    p.store_param_remainders = remainders->boolean();
    if (p.store_param_remainders && (t.precision != "bf16" || p.main_params != StateDtype::fp32))
      remainders->fail("false: the remainders complete bf16 parameters to an fp32 master copy (bf16 training, "
                       "main_params_dtype fp32)");
  }
  return p;
}

TrainingConfig parse_training(const Reader& r) {
  r.only_keys({"seq_length", "global_batch_size", "precision", "optimizer", "main_params_dtype", "exp_avg_dtype",
               "exp_avg_sq_dtype", "store_param_remainders", "seq_length_buckets", "seq_length_histogram", "fp8", "lr",
               "min_lr", "lr_warmup_iters", "lr_decay_iters", "lr_decay_style", "clip_grad"});
  TrainingConfig t;
  t.seq_length = r.required("seq_length").integer(1, kMaxSequence);
  t.global_batch_size = r.required("global_batch_size").integer(1, kMaxBatch);
  if (auto f = r.find("precision")) t.precision = f->one_of({"bf16", "fp16", "fp32"}, "precision");
  if (auto f = r.find("optimizer")) t.optimizer = f->one_of({"adam", "sgd"}, "optimizer");
  t.optimizer_precision = parse_optimizer_precision(r, t);
  t.recipe = parse_training_recipe(r);
  if (auto f = r.find("fp8"); f && !f->value().is_null()) {
    if (t.precision == "fp32") f->fail("expected no fp8 with precision fp32 (FP8 runs beside bf16 or fp16)");
    t.fp8 = parse_fp8(*f);
  }
  if (auto buckets = r.find("seq_length_buckets")) {
    double fraction_sum = 0;
    for (const Reader& item : buckets->non_empty_elements()) {
      item.only_keys({"max", "fraction"});
      SeqLengthBucket bucket;
      bucket.max = item.required("max").integer(1, kMaxSequence);
      if (bucket.max > t.seq_length)  // as a histogram's lengths are: the longest sequence is seq_length
        item.required("max").fail(fmt::format("expected a length in [1, training.seq_length {}]", t.seq_length));
      bucket.fraction = item.required("fraction").number(0, 1, "expected a fraction in [0, 1]");
      if (!t.seq_length_buckets.empty() && bucket.max <= t.seq_length_buckets.back().max)
        item.required("max").fail(fmt::format("expected a max above the previous bucket's {}",
                                              t.seq_length_buckets.back().max));
      fraction_sum += bucket.fraction;
      t.seq_length_buckets.push_back(bucket);
    }
    if (std::abs(fraction_sum - 1.0) > 1e-6)
      buckets->fail_plain(fmt::format("expected bucket fractions summing to 1, got {:.6g}", fraction_sum));
  }
  if (auto histogram = r.find("seq_length_histogram")) {
    if (!t.seq_length_buckets.empty())
      histogram->fail_plain("expected either seq_length_buckets or seq_length_histogram, not both");
    t.seq_length_histogram = parse_seq_length_histogram(
        *histogram, std::filesystem::path(r.file()).parent_path(), t.seq_length);
  }
  return t;
}

std::vector<int> int_list(const Reader& r, std::int64_t min, std::int64_t max) {
  std::vector<int> values;
  for (const Reader& item : r.non_empty_elements()) {
    const int value = static_cast<int>(item.integer(min, max));
    if (std::find(values.begin(), values.end(), value) != values.end()) item.fail("expected distinct values");
    values.push_back(value);
  }
  return values;
}

template <typename T, typename Parse>
std::vector<T> parsed_list(const Reader& r, Parse parse) {
  std::vector<T> values;
  for (const Reader& item : r.non_empty_elements()) {
    const T value = parse(item);
    if (std::find(values.begin(), values.end(), value) != values.end()) item.fail("expected distinct values");
    values.push_back(value);
  }
  return values;
}

Schedule parse_schedule(const Reader& r) { return *schedule_from_string(r.one_of(schedule_names(), "schedule")); }
Recompute parse_recompute(const Reader& r) {
  return *recompute_from_string(r.one_of(recompute_names(), "recompute granularity"));
}

// Sizes of the parallel dimensions, shared by `search` (lists) and `strategy` (single values).
const std::initializer_list<std::string_view> kParallelKeys = {
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
    "expert_model_parallel_size", "expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size",
    "micro_batch_size"};

// Virtual stages are what interleaving is for (strategies/search.cpp pairs them so): lists that pair no schedule
// with a virtual-stage count would search nothing, which is the scenario's mistake, not "nothing feasible".
void refuse_empty_schedule_product(const Reader& r, const SearchSpace& s) {
  for (Schedule schedule : s.schedule)
    for (int vpp : s.virtual_pipeline_model_parallel_size)
      if ((schedule == Schedule::interleaved_1f1b) == (vpp > 1)) return;
  const Reader& where = r.find("virtual_pipeline_model_parallel_size") ? r.required("virtual_pipeline_model_parallel_size")
                                                                       : r.required("schedule");
  where.fail_plain(
      "expected a virtual_pipeline_model_parallel_size above 1 with schedule \"interleaved-1f1b\", or 1 with another "
      "schedule: these lists pair none, so the search has no candidate");
}

SearchSpace parse_search(const Reader& r) {
  r.only_keys({"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
               "expert_model_parallel_size", "expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size",
               "micro_batch_size", "sequence_parallel", "zero_stage", "recompute", "schedule", "per_layer",
               "hot_switch"});
  SearchSpace s;
  std::vector<int>* lists[] = {&s.tensor_model_parallel_size, &s.pipeline_model_parallel_size,
                               &s.context_parallel_size, &s.expert_model_parallel_size,
                               &s.expert_tensor_parallel_size, &s.virtual_pipeline_model_parallel_size,
                               &s.micro_batch_size};
  int i = 0;
  for (std::string_view key : kParallelKeys) {
    if (auto f = r.find(key)) *lists[i] = int_list(*f, 1, kMaxParallelSize);
    ++i;
  }
  if (auto f = r.find("zero_stage")) s.zero_stage = int_list(*f, 0, 3);
  if (auto f = r.find("sequence_parallel")) s.sequence_parallel = parsed_list<bool>(*f, [](const Reader& x) { return x.boolean(); });
  if (auto f = r.find("recompute")) s.recompute = parsed_list<Recompute>(*f, parse_recompute);
  if (auto f = r.find("schedule")) s.schedule = parsed_list<Schedule>(*f, parse_schedule);
  if (auto f = r.find("per_layer")) s.per_layer = f->boolean();
  if (auto f = r.find("hot_switch")) s.hot_switch = f->boolean();
  refuse_empty_schedule_product(r, s);
  return s;
}

Strategy parse_strategy(const Reader& r) {
  // Beside an asymmetric plan (read by parse_pipelines) only the fields its pipelines share may appear.
  if (r.find("pipelines")) r.only_keys({"pipelines", "sequence_parallel", "recompute", "schedule", "zero_stage"});
  r.only_keys({"pipelines", "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
               "expert_model_parallel_size", "expert_tensor_parallel_size", "virtual_pipeline_model_parallel_size",
               "micro_batch_size", "sequence_parallel", "zero_stage", "recompute", "schedule", "data_parallel_size",
               "num_micro_batches", "pipeline_model_parallel_layout", "recompute_modules"});
  Strategy s;
  int* sizes[] = {&s.tensor_model_parallel_size, &s.pipeline_model_parallel_size, &s.context_parallel_size,
                  &s.expert_model_parallel_size, &s.expert_tensor_parallel_size,
                  &s.virtual_pipeline_model_parallel_size, &s.micro_batch_size};
  int i = 0;
  for (std::string_view key : kParallelKeys) {
    if (auto f = r.find(key)) *sizes[i] = static_cast<int>(f->integer(1, kMaxParallelSize));
    ++i;
  }
  if (auto f = r.find("data_parallel_size")) s.data_parallel_size = static_cast<int>(f->integer(1, kMaxGpus));
  if (auto f = r.find("num_micro_batches")) s.num_micro_batches = static_cast<int>(f->integer(1, kMaxBatch));
  if (auto f = r.find("zero_stage")) s.zero_stage = static_cast<int>(f->integer(0, 3));
  if (auto f = r.find("sequence_parallel")) s.sequence_parallel = f->boolean();
  if (auto f = r.find("recompute")) s.recompute = parse_recompute(*f);
  if (auto f = r.find("recompute_modules")) s.recompute_modules = parse_recompute_modules(*f, s.recompute);
  if (auto f = r.find("schedule")) s.schedule = parse_schedule(*f);
  if (auto f = r.find("pipeline_model_parallel_layout")) {
    std::string expected;
    std::optional<PipelineLayout> layout = parse_pipeline_layout(f->string(), expected);
    if (!layout) f->fail(expected);
    s.pipeline_model_parallel_layout = std::move(*layout);
  }
  return s;
}

// The search enumerates every combination of its lists before pruning any: refuse a space whose
// enumeration alone would take minutes and gigabytes, saying how large it is.
void check_search_size(const std::optional<Reader>& search, const SearchSpace& space, const Reader& root) {
  const std::vector<std::pair<const char*, std::size_t>> lists = {
      {"tensor_model_parallel_size", space.tensor_model_parallel_size.size()},
      {"pipeline_model_parallel_size", space.pipeline_model_parallel_size.size()},
      {"context_parallel_size", space.context_parallel_size.size()},
      {"expert_model_parallel_size", space.expert_model_parallel_size.size()},
      {"expert_tensor_parallel_size", space.expert_tensor_parallel_size.size()},
      {"virtual_pipeline_model_parallel_size", space.virtual_pipeline_model_parallel_size.size()},
      {"sequence_parallel", space.sequence_parallel.size()},
      {"micro_batch_size", space.micro_batch_size.size()},
      {"zero_stage", space.zero_stage.size()},
      {"recompute", space.recompute.size()},
      {"schedule", space.schedule.size()}};
  std::int64_t combinations = 1;
  std::string factors;
  for (const auto& [name, size] : lists) {
    combinations *= static_cast<std::int64_t>(size);  // at most 2^16 values each: no overflow before the check
    if (combinations > (std::int64_t{1} << 40)) combinations = std::int64_t{1} << 40;
    if (size > 1) factors += fmt::format("{}{} {}", factors.empty() ? "" : " x ", name, size);
  }
  if (combinations <= kMaxSearchCombinations) return;
  (search ? *search : root)
      .fail_plain(fmt::format("expected a search of at most {} combinations, got {}{} ({}): shorten the longest lists",
                              kMaxSearchCombinations, combinations >= (std::int64_t{1} << 40) ? "over " : "",
                              combinations, factors));
}

// A pinned strategy's sizes must describe the cluster and the batch: the product of the parallel sizes
// divides the GPUs, and data_parallel_size and num_micro_batches, if given, are what they derive to (never
// replaced). Both are derived here, so the scenario written back reads the same.
void complete_pinned_sizes(const Reader& r, Strategy& st, const Scenario& s) {
  const std::int64_t world = s.cluster.total_gpus();
  const std::int64_t model_parallel = st.model_parallel_size();
  if (model_parallel > world || world % model_parallel != 0)
    r.fail_plain(fmt::format("expected tensor x pipeline x context parallel sizes ({} x {} x {} = {}) that divide the "
                             "cluster's {} GPUs", st.tensor_model_parallel_size, st.pipeline_model_parallel_size,
                             st.context_parallel_size, model_parallel, world));
  const int data_parallel = static_cast<int>(world / model_parallel);
  if (auto f = r.find("data_parallel_size"); f && st.data_parallel_size != data_parallel)
    f->fail(fmt::format("expected {} (the cluster's {} GPUs / tensor x pipeline x context {})", data_parallel, world,
                        model_parallel));
  st.data_parallel_size = data_parallel;
  const std::int64_t per_step = std::int64_t{data_parallel} * st.micro_batch_size;
  const std::int64_t global = s.training.global_batch_size;
  if (global % per_step != 0) return;  // the search explains why this strategy cannot run
  if (auto f = r.find("num_micro_batches"); f && st.num_micro_batches != global / per_step)
    f->fail(fmt::format("expected {} (global_batch_size {} / (micro_batch_size x data_parallel_size {}))",
                        global / per_step, global, per_step));
  st.num_micro_batches = static_cast<int>(global / per_step);
}

}  // namespace

Scenario parse_scenario(const nlohmann::json& document, const std::string& source, const std::string& json_path) {
  const Reader root(document, source, json_path);
  if (!document.is_object()) root.fail("expected a JSON object at the top level");
  root.only_keys({"name", "model", "training", "framework", "cluster", "search", "strategy", "profile",
                  "profile_scaling", "cost", "sweep"});
  Scenario s;
  s.source = source;
  if (auto f = root.find("name")) {
    if (!f->value().is_string()) f->fail("expected a string");
    s.name = f->value().get<std::string>();
  }
  const Reader model = root.required("model");
  s.model = parse_model(model);
  s.training = parse_training(root.required("training"));
  if (auto f = root.find("framework")) s.framework = parse_framework(*f, s.model, model.find("attention_backend"));
  if (s.model.max_position_embeddings == 0) s.model.max_position_embeddings = s.training.seq_length;
  if (!s.model.position_embedding_rope && s.training.seq_length > s.model.max_position_embeddings)
    root.required("training").required("seq_length")
        .fail(fmt::format("expected at most max_position_embeddings {} (learned position embeddings)",
                          s.model.max_position_embeddings));
  s.cluster = parse_cluster(root.required("cluster"));
  if (auto f = root.find("search")) s.search = parse_search(*f);
  if (s.search.hot_switch) check_hot_switch_preconditions(s, root.required("search").required("hot_switch"));
  if (auto f = root.find("strategy"); f && f->find("per_layer")) {
    f->only_keys({"per_layer"});
    const Reader plan = f->required("per_layer");
    plan.expect_object();
    s.per_layer_plan = Scenario::PinnedPlan{plan.value().dump(), plan.path()};
  } else if (f && f->find("hot_switch")) {
    f->only_keys({"hot_switch"});
    const Reader plan = f->required("hot_switch");
    plan.expect_object();
    check_hot_switch_preconditions(s, plan);
    s.hot_switch_plan = Scenario::PinnedPlan{plan.value().dump(), plan.path()};
  } else if (f) {
    s.strategy = parse_strategy(*f);
    if (auto modules = f->find("recompute_modules")) check_recompute_modules(*modules, s.strategy->recompute_modules, s);
    if (!f->find("pipelines")) complete_pinned_sizes(*f, *s.strategy, s);
  }
  if (!s.strategy && !s.pins_family_plan()) check_search_size(root.find("search"), s.search, root);
  if (auto f = root.find("strategy"); f && f->find("pipelines")) {
    s.pipelines = parse_pipelines(*f->find("pipelines"), s);
    if (s.strategy->schedule != Schedule::gpipe && s.strategy->schedule != Schedule::one_f_one_b)
      f->required("schedule").fail("expected \"gpipe\" or \"1f1b\" for an asymmetric plan");
    if (s.strategy->zero_stage > 1)
      f->required("zero_stage").fail("expected 0 or 1 for an asymmetric plan (ZeRO-1 shards over its pipelines)");
  }
  apply_distributed_optimizer(s, root);
  check_deepspeed_bf16_optimizer(s, root);
  check_deferred_embedding_wgrad(s, root);
  if (s.training.fp8) check_fp8_scenario(s, root);
  if (auto f = root.find("profile")) s.profile = f->string();
  if (auto f = root.find("profile_scaling")) s.profile_scaling = f->boolean();
  // Checked here so that no reader of a scenario accepts a bad one; the run reads them again
  // (core/scenario_input.hpp), since the search does not use them.
  parse_cost_section(root, s.cluster);
  parse_sweep_section(root);
  return s;
}

Scenario parse_scenario_text(const std::string& text, const std::string& source) {
  return parse_scenario(parse_input_json(text, source), source);
}

Scenario load_scenario(const std::filesystem::path& path) {
  return parse_scenario_text(read_input_file(path, "a readable scenario JSON"), path.string());
}

}  // namespace twin
