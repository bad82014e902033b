// The pieces of an asymmetric plan that do not depend on the op graphs: unit ranges, gradient segments
// and their bytes, stage memory (by the uniform memory model of an equal-depth pipeline) and the plan's
// names.
#include "strategies/heterogeneous/asymmetric_plan.hpp"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "core/scenario_pipelines.hpp"
#include "strategies/sharded_parameters.hpp"
#include "strategies/validity.hpp"

namespace twin {

std::vector<StageUnits> stage_units(const ModelConfig& model, const AsymmetricPipeline& pipeline) {
  std::vector<StageUnits> units;
  int layer = 0;
  const int stages = static_cast<int>(pipeline.stages.size());
  for (int s = 0; s < stages; ++s) {
    const int end_layer = layer + pipeline.stages[s].num_layers;
    units.push_back({s == 0 ? -1 : layer, s == stages - 1 ? model.num_layers + 1 : end_layer});
    layer = end_layer;
  }
  return units;
}

int model_order_unit(const ModelConfig& model, std::int32_t parameter_unit) {
  if (parameter_unit == kEmbeddingUnit) return -1;
  return parameter_unit == kHeadUnit ? model.num_layers : parameter_unit;
}

std::vector<GradientSegment> gradient_segments(const ModelConfig& model, const std::vector<AsymmetricPipeline>& plan) {
  std::set<int> cuts = {-1, model.num_layers + 1};
  std::vector<std::vector<StageUnits>> units;
  for (const AsymmetricPipeline& pipeline : plan) {
    units.push_back(stage_units(model, pipeline));
    for (const StageUnits& u : units.back()) cuts.insert(u.first_unit);
  }
  std::vector<GradientSegment> segments;
  for (auto it = cuts.begin(); std::next(it) != cuts.end(); ++it) {
    GradientSegment segment{*it, *std::next(it), {}};
    for (const auto& stages : units) {
      int s = 0;
      while (stages[s].end_unit <= segment.first_unit) ++s;
      segment.stage_of_pipeline.push_back(s);
    }
    segments.push_back(std::move(segment));
  }
  return segments;
}

namespace {

std::int64_t unit_parameters(const ModelConfig& model, int unit, int tp, bool single_stage) {
  if (unit < 0) return embedding_parameters_per_rank(model, tp);
  if (unit >= model.num_layers) return output_parameters_per_rank(model, tp, single_stage);
  return layer_parameters_per_rank(model, unit, tp, 1).dense;
}

}  // namespace

Bytes segment_gradient_bytes(const ModelConfig& model, const GradientSegment& segment, int tp, bool single_stage) {
  Bytes bytes = 0;
  for (int unit = segment.first_unit; unit < segment.end_unit; ++unit)
    bytes += 2 * unit_parameters(model, unit, tp, single_stage);
  return bytes;
}

std::int64_t ring_tag(int segment, int step, int pipelines) {
  return static_cast<std::int64_t>(segment) * 2 * pipelines + step;
}

Bytes ring_step_bytes(Bytes shard_bytes, int pipelines) { return (shard_bytes + pipelines - 1) / pipelines; }

std::int64_t stage_parameters(const ModelConfig& model, const AsymmetricPipeline& pipeline, int stage) {
  const StageUnits u = stage_units(model, pipeline)[stage];
  std::int64_t total = 0;
  for (int unit = u.first_unit; unit < u.end_unit; ++unit)
    total += unit_parameters(model, unit, pipeline.stages[stage].tensor_model_parallel_size,
                             pipeline.stages.size() == 1);
  return total;
}

Strategy stage_strategy(const Strategy& shared, const AsymmetricPipeline& pipeline, int stage) {
  Strategy s = shared;
  s.tensor_model_parallel_size = pipeline.stages[stage].tensor_model_parallel_size;
  s.pipeline_model_parallel_size = static_cast<int>(pipeline.stages.size());
  s.context_parallel_size = 1;
  s.expert_model_parallel_size = 1;
  s.data_parallel_size = 1;
  s.virtual_pipeline_model_parallel_size = 1;
  s.sequence_parallel = shared.sequence_parallel && s.tensor_model_parallel_size > 1;
  s.micro_batch_size = pipeline.micro_batch_size;
  s.num_micro_batches = pipeline.num_micro_batches;
  s.zero_stage = 0;
  return s;
}

MemoryBreakdown asymmetric_stage_memory(const Scenario& scenario, const Strategy& shared,
                                        const AsymmetricPipeline& pipeline, int stage, int pipelines) {
  const Strategy s = stage_strategy(shared, pipeline, stage);
  Scenario alike = scenario;
  alike.pipelines.clear();
  alike.model.num_layers = pipeline.stages[stage].num_layers * s.pipeline_model_parallel_size;
  MemoryBreakdown memory = estimate_memory(alike, s).per_stage[stage];
  if (shared.zero_stage >= 1) memory.optimizer_states = (memory.optimizer_states + pipelines - 1) / pipelines;
  return memory;
}

std::string asymmetric_out_of_memory_reason(const Scenario& scenario, const Strategy& shared,
                                            const std::vector<AsymmetricPipeline>& plan, MemoryEstimate& memory) {
  memory = MemoryEstimate{};
  std::string reason;
  double worst_over = 0;
  for (std::size_t p = 0; p < plan.size(); ++p) {
    for (std::size_t s = 0; s < plan[p].stages.size(); ++s) {
      const MemoryBreakdown m = asymmetric_stage_memory(scenario, shared, plan[p], static_cast<int>(s),
                                                        static_cast<int>(plan.size()));
      memory.per_stage.push_back(m);
      const int index = static_cast<int>(memory.per_stage.size()) - 1;
      if (m.total() > memory.per_stage[memory.worst_stage].total()) memory.worst_stage = index;
      const GpuSpec& gpu = scenario.cluster.group_of_rank(plan[p].stages[s].devices.front()).gpu;
      const double used_GiB = static_cast<double>(m.total()) / kGiB;
      if (used_GiB > gpu.memory_GiB && used_GiB - gpu.memory_GiB > worst_over) {
        worst_over = used_GiB - gpu.memory_GiB;
        reason = fmt::format("out of memory: {:.1f} GiB > {:.1f} GiB on pipeline {} stage {} ({})", used_GiB,
                             gpu.memory_GiB, p, s, gpu.name);
      }
    }
  }
  return reason;
}

namespace {

// "H100-SXM-80GB" -> "H100", "A100-SXM-40GB" -> "A100-40GB": short enough for keys and tables.
std::string short_gpu(const std::string& name) {
  const auto dash = name.find('-');
  if (dash == std::string::npos) return name;
  std::string out = name.substr(0, dash);
  const auto last = name.rfind('-');
  if (last != dash) {
    const std::string tail = name.substr(last + 1);
    if (tail.find("GB") != std::string::npos) out += "-" + tail;
  }
  return out;
}

std::string stage_text(const std::string& gpu, const AsymmetricStage& stage) {
  return fmt::format("{}x{}:tp{}/L{}", short_gpu(gpu), stage.devices.size(), stage.tensor_model_parallel_size,
                     stage.num_layers);
}

}  // namespace

std::string asymmetric_plan_key(const Strategy& shared, const std::vector<AsymmetricPipeline>& plan) {
  std::string key = "hetero";
  for (std::size_t p = 0; p < plan.size(); ++p) {
    key += fmt::format(".p{}[", p);
    for (std::size_t s = 0; s < plan[p].stages.size(); ++s)
      key += (s ? "," : "") + fmt::format("d{}+{}:tp{}/L{}", plan[p].stages[s].devices.front(),
                                          plan[p].stages[s].devices.size(), plan[p].stages[s].tensor_model_parallel_size,
                                          plan[p].stages[s].num_layers);
    key += fmt::format("]mbs{}x{}", plan[p].micro_batch_size, plan[p].num_micro_batches);
  }
  return key + fmt::format(".{}.z{}.rc-{}.{}", shared.sequence_parallel ? "sp" : "nosp", shared.zero_stage,
                           to_string(shared.recompute), to_string(shared.schedule));
}

AsymmetricPlan asymmetric_plan(const Scenario& scenario, const Strategy& shared,
                               const std::vector<AsymmetricPipeline>& pipelines) {
  AsymmetricPlan plan;
  plan.shared = shared;
  plan.pipelines = pipelines;
  for (const AsymmetricPipeline& p : pipelines) {
    std::vector<std::string> gpus;
    for (const AsymmetricStage& s : p.stages) gpus.push_back(scenario.cluster.group_of_rank(s.devices.front()).gpu.name);
    plan.stage_gpus.push_back(std::move(gpus));
  }
  return plan;
}

std::string AsymmetricPlan::summary() const {
  std::string text = fmt::format("{} pipeline{}:", pipelines.size(), pipelines.size() == 1 ? "" : "s");
  for (std::size_t p = 0; p < pipelines.size(); ++p) {
    text += fmt::format(" {}{} x{} [", p ? "| " : "", pipelines[p].micro_batch_size, pipelines[p].num_micro_batches);
    for (std::size_t s = 0; s < pipelines[p].stages.size(); ++s)
      text += (s ? " > " : "") + stage_text(stage_gpus[p][s], pipelines[p].stages[s]);
    text += "]";
  }
  return text;
}

nlohmann::json AsymmetricPlan::to_json() const {
  nlohmann::json detail = asymmetric_strategy_json(shared, pipelines);
  detail["stage_gpus"] = stage_gpus;
  return detail;
}

std::optional<nlohmann::json> AsymmetricPlan::plan_file_strategy() const {
  return asymmetric_strategy_json(shared, pipelines);
}

Candidate AsymmetricPlan::evaluate(const Scenario& scenario, const Profile& profile, bool record_op_timings,
                                   IterationGraph* graph) const {
  return evaluate_asymmetric_plan(scenario, profile, shared, pipelines, record_op_timings, graph);
}

std::int64_t asymmetric_op_count(const Scenario& scenario, const Strategy& shared, std::int64_t micro_batches,
                                 std::int64_t pipelines) {
  Strategy whole = shared;
  whole.num_micro_batches = static_cast<int>(std::min<std::int64_t>(micro_batches, std::numeric_limits<int>::max()));
  // Each gradient segment (at most one per unit) is reduced by a ring over the pipelines: a send and a receive
  // per step, 2 (pipelines - 1) steps, on one class of every pipeline.
  const double ring_ops = static_cast<double>(scenario.model.num_layers + 2) * 4.0 * static_cast<double>(pipelines) *
                          static_cast<double>(std::max<std::int64_t>(0, pipelines - 1));
  const double ops = static_cast<double>(estimated_op_count(scenario, whole)) + ring_ops;
  return ops > 1e15 ? std::int64_t{1000000000000000} : static_cast<std::int64_t>(ops);
}

std::optional<std::string> asymmetric_too_many_ops_reason(const Scenario& scenario, const Strategy& shared,
                                                          std::int64_t micro_batches, std::int64_t pipelines) {
  const std::int64_t ops = asymmetric_op_count(scenario, shared, micro_batches, pipelines);
  if (ops <= kMaxOpsPerCandidate) return std::nullopt;
  return fmt::format("its op graph would hold about {:.1f} M ops ({} micro-batches x {} layers, and a gradient ring "
                     "over {} pipelines per segment), more than the limit of {} M: a larger micro_batch_size, a "
                     "smaller global batch, or fewer pipelines (fewer nodes)",
                     static_cast<double>(ops) / 1e6, micro_batches, scenario.model.num_layers, pipelines,
                     kMaxOpsPerCandidate / 1000000);
}

}  // namespace twin
