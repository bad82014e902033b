// Parsing strategy.pipelines. A stage's `devices` are either a list of global GPU indices or a range
// {"node_group": g, "first": j, "count": k} (the j-th to (j+k-1)-th GPU of node group g); both become
// global indices, so that to_json writes one form and the round trip is exact.
#include "core/scenario_pipelines.hpp"

#include <map>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace twin {
namespace {

constexpr std::int64_t kMaxPipelineBatch = 1 << 24;

int first_rank_of_group(const Cluster& cluster, int group) {
  int first = 0;
  for (int g = 0; g < group; ++g) first += cluster.node_groups[g].count * cluster.node_groups[g].gpus_per_node;
  return first;
}

std::vector<int> parse_devices(const JsonReader& r, const Cluster& cluster) {
  const int total = cluster.total_gpus();
  std::vector<int> devices;
  if (r.value().is_object()) {
    r.only_keys({"node_group", "first", "count"});
    const int groups = static_cast<int>(cluster.node_groups.size());
    const int group = static_cast<int>(r.required("node_group").integer(0, groups - 1));
    const int size = cluster.node_groups[group].count * cluster.node_groups[group].gpus_per_node;
    const int first = static_cast<int>(r.required("first").integer(0, size - 1));
    const JsonReader count_reader = r.required("count");
    const int count = static_cast<int>(count_reader.integer(1, size));
    if (first + count > size)
      count_reader.fail(fmt::format("expected at most {} (node group {} has {} GPUs, the range starts at {})",
                                    size - first, group, size, first));
    const int base = first_rank_of_group(cluster, group);
    for (int i = 0; i < count; ++i) devices.push_back(base + first + i);
    return devices;
  }
  for (const JsonReader& item : r.non_empty_elements())
    devices.push_back(static_cast<int>(
        item.integer(0, total - 1)));  // "expected an integer in [0, total-1]": out of range
  return devices;
}

void require_divides(const JsonReader& at, int tp, std::int64_t value, const char* name) {
  if (value % tp != 0)
    at.fail_plain(fmt::format("tensor_model_parallel_size {} does not divide {} {}", tp, name, value));
}

// One stage of an asymmetric pipeline: its devices (each used once over the plan, all on one node), its TP size
// (the device count, which divides the heads, query groups and FFN) and its layers.
AsymmetricStage parse_stage(const JsonReader& sr, const ModelConfig& model, const Cluster& cluster,
                            std::map<int, std::string>& owner) {
  sr.only_keys({"devices", "tensor_model_parallel_size", "num_layers"});
  AsymmetricStage stage;
  const JsonReader devices = sr.required("devices");
  stage.devices = parse_devices(devices, cluster);
  for (int device : stage.devices) {
    auto [it, fresh] = owner.try_emplace(device, sr.path());
    if (!fresh) devices.fail_plain(fmt::format("device {} is used twice (already by {})", device, it->second));
  }
  const int node = cluster.node_of_rank(stage.devices.front());
  for (int device : stage.devices)
    if (cluster.node_of_rank(device) != node)
      devices.fail_plain(fmt::format("expected the stage's devices on one node (tensor-parallel groups stay "
                                     "inside a node): device {} is on node {}, device {} on node {}",
                                     stage.devices.front(), node, device, cluster.node_of_rank(device)));
  const int count = static_cast<int>(stage.devices.size());
  stage.tensor_model_parallel_size = count;
  if (auto f = sr.find("tensor_model_parallel_size")) {
    stage.tensor_model_parallel_size = static_cast<int>(f->integer(1, 1 << 16));
    if (stage.tensor_model_parallel_size != count)
      f->fail_plain(fmt::format("expected tensor_model_parallel_size equal to the stage's {} devices (a stage is "
                                "one tensor-parallel group), got {}", count, stage.tensor_model_parallel_size));
  }
  const JsonReader at = sr.find("tensor_model_parallel_size") ? *sr.find("tensor_model_parallel_size") : sr;
  require_divides(at, stage.tensor_model_parallel_size, model.num_attention_heads, "num_attention_heads");
  require_divides(at, stage.tensor_model_parallel_size, model.num_query_groups, "num_query_groups");
  require_divides(at, stage.tensor_model_parallel_size, model.ffn_hidden_size, "ffn_hidden_size");
  stage.num_layers = static_cast<int>(sr.required("num_layers").integer(1, model.num_layers));
  return stage;
}

}  // namespace

std::vector<AsymmetricPipeline> parse_pipelines(const JsonReader& r, const Scenario& scenario) {
  const ModelConfig& model = scenario.model;
  const Cluster& cluster = scenario.cluster;
  if (model.is_moe())
    r.fail_plain("asymmetric plans (strategy.pipelines) support dense models only; this model has experts");
  if (model.mtp_num_layers > 0)
    r.fail_plain("asymmetric plans (strategy.pipelines) support models without multi-token prediction; this model "
                 "has mtp_num_layers > 0");
  std::vector<AsymmetricPipeline> pipelines;
  std::map<int, std::string> owner;  // device -> path of the stage that uses it
  std::int64_t batch = 0;
  for (const JsonReader& pr : r.non_empty_elements()) {
    pr.only_keys({"micro_batch_size", "num_micro_batches", "stages"});
    AsymmetricPipeline pipeline;
    pipeline.micro_batch_size = static_cast<int>(pr.required("micro_batch_size").integer(1, kMaxPipelineBatch));
    pipeline.num_micro_batches = static_cast<int>(pr.required("num_micro_batches").integer(1, kMaxPipelineBatch));
    batch += std::int64_t{pipeline.micro_batch_size} * pipeline.num_micro_batches;
    const JsonReader stages = pr.required("stages");
    int layers = 0;
    for (const JsonReader& sr : stages.non_empty_elements()) {
      AsymmetricStage stage = parse_stage(sr, model, cluster, owner);
      layers += stage.num_layers;
      pipeline.stages.push_back(std::move(stage));
    }
    if (layers != model.num_layers)
      stages.fail_plain(fmt::format("expected the stages' num_layers to sum to the model's {}, got {}",
                                    model.num_layers, layers));
    if (pipeline.stages.size() > 1 && !model.untie_embeddings_and_output_weights)
      stages.fail_plain("asymmetric pipelines of several stages need untied embeddings "
                        "(untie_embeddings_and_output_weights true)");
    pipelines.push_back(std::move(pipeline));
  }
  if (batch != scenario.training.global_batch_size)
    r.fail_plain(fmt::format("expected the pipelines' batch shares (micro_batch_size * num_micro_batches) to sum "
                             "to global_batch_size {}, got {}", scenario.training.global_batch_size, batch));
  return pipelines;
}

nlohmann::json pipelines_json(const std::vector<AsymmetricPipeline>& pipelines) {
  nlohmann::json out = nlohmann::json::array();
  for (const AsymmetricPipeline& p : pipelines) {
    nlohmann::json stages = nlohmann::json::array();
    for (const AsymmetricStage& s : p.stages)
      stages.push_back({{"devices", s.devices},
                        {"tensor_model_parallel_size", s.tensor_model_parallel_size},
                        {"num_layers", s.num_layers}});
    out.push_back({{"micro_batch_size", p.micro_batch_size},
                   {"num_micro_batches", p.num_micro_batches},
                   {"stages", stages}});
  }
  return out;
}

nlohmann::json asymmetric_strategy_json(const Strategy& shared, const std::vector<AsymmetricPipeline>& pipelines) {
  return {{"pipelines", pipelines_json(pipelines)},
          {"sequence_parallel", shared.sequence_parallel},
          {"recompute", to_string(shared.recompute)},
          {"schedule", to_string(shared.schedule)},
          {"zero_stage", shared.zero_stage}};
}

}  // namespace twin
