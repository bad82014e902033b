// The plan value type, its layouts' geometry (data groups) and its memory per stage.
// Memory follows memory.cpp term by term (model states per parameter, Korthikanti activations walked
// over the schedule, NCCL buffers per communicator, workspace), each layer with its own TP/Ulysses
// group, data group, ZeRO stage and recompute.
#include "strategies/per_layer/per_layer.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "strategies/per_layer/per_layer_edges.hpp"
#include "strategies/schedule.hpp"
#include "strategies/flops.hpp"
#include "strategies/memory.hpp"
#include "strategies/sharded_parameters.hpp"

namespace twin {
namespace {


std::string run_length(const std::vector<LayerStrategy>& layers, const char* times, const char* plus) {
  std::string out;
  for (std::size_t i = 0; i < layers.size();) {
    std::size_t j = i;
    while (j < layers.size() && layers[j] == layers[i]) ++j;
    if (!out.empty()) out += plus;
    out += fmt::format("{}{}{}", to_string(layers[i]), times, j - i);
    i = j;
  }
  return out;
}

std::string joined(const std::vector<int>& values, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) out += (i ? separator : "") + std::to_string(values[i]);
  return out;
}

}  // namespace

int weight_tp(const LayerLayout& layout) { return layout.ulysses ? 1 : layout.group; }

std::string to_string(const LayerStrategy& s) {
  return fmt::format("{}{}.z{}.rc-{}", s.layout.ulysses ? "usp" : "tp", s.layout.group, s.zero_stage,
                     to_string(s.recompute));
}

int first_layer_of_split(const std::vector<int>& stage_layers, int stage) {
  int first = 0;
  for (int i = 0; i < stage; ++i) first += stage_layers.at(static_cast<std::size_t>(i));
  return first;
}

int PerLayerPlan::first_layer(int stage) const { return first_layer_of_split(stage_layers, stage); }

std::string PerLayerPlan::key() const {
  return fmt::format("per-layer.pp{}.smb{}.{}.split{}.{}", pipeline_stages, stage_micro_batch, to_string(schedule),
                     joined(stage_layers, "-"), run_length(layers, "*", "+"));
}

std::string PerLayerPlan::summary() const {
  return fmt::format("pp {} ({} layers), {} samples x {} micro-batches, {}: {}", pipeline_stages,
                     joined(stage_layers, "+"), stage_micro_batch, num_micro_batches, to_string(schedule),
                     run_length(layers, " x", ", "));
}

nlohmann::json PerLayerPlan::to_json() const {
  nlohmann::json layer_list = nlohmann::json::array();
  for (const LayerStrategy& s : layers)
    layer_list.push_back({{"layout", s.layout.ulysses ? "ulysses" : "tensor"},
                          {"group_size", s.layout.group},
                          {"zero_stage", s.zero_stage},
                          {"recompute", to_string(s.recompute)}});
  return {{"pipeline_model_parallel_size", pipeline_stages},
          {"stage_micro_batch_size", stage_micro_batch},
          {"num_micro_batches", num_micro_batches},
          {"schedule", to_string(schedule)},
          {"stage_num_layers", stage_layers},
          {"layers", layer_list}};
}

int stage_gpus(const Scenario& scenario, const PerLayerPlan& plan) {
  return scenario.cluster.total_gpus() / plan.pipeline_stages;
}

std::int64_t tokens_per_gpu(const Scenario& scenario, const PerLayerPlan& plan) {
  return static_cast<std::int64_t>(plan.stage_micro_batch) * scenario.training.seq_length / stage_gpus(scenario, plan);
}

Strategy megatron_layer_strategy(const Scenario& scenario, const LayerStrategy& layer, int gpus,
                                 int stage_micro_batch) {
  const int tp = layer.layout.group;
  Strategy st;
  st.tensor_model_parallel_size = tp;
  st.pipeline_model_parallel_size = scenario.cluster.total_gpus() / gpus;
  st.data_parallel_size = gpus / tp;
  st.sequence_parallel = tp > 1;
  st.micro_batch_size = std::max(1, stage_micro_batch * tp / gpus);
  st.zero_stage = layer.zero_stage;
  st.recompute = layer.recompute;
  return st;
}

BlockSamples block_samples(const LayerLayout& layout, int gpus, int stage_micro_batch, int gpu) {
  const std::int64_t samples = static_cast<std::int64_t>(stage_micro_batch) * layout.group;
  if (gpus <= 0 || samples % gpus != 0 || gpu < 0 || gpu >= gpus)
    throw std::invalid_argument(fmt::format("a block of {} GPUs of {} holds {} / {} samples of a micro-batch: not "
                                            "whole", layout.group, gpus, samples, gpus));
  const int count = static_cast<int>(samples / gpus);
  return {gpu / layout.group * count, count};
}

EdgeRows edge_rows(const LayerLayout& beside, int gpus, int stage_micro_batch, int gpu) {
  if (!beside.ulysses) return {block_samples(edge_layout(beside), gpus, stage_micro_batch, gpu), 0, 1};
  return {block_samples(beside, gpus, stage_micro_batch, gpu), gpu % beside.group, beside.group};
}

int data_group_of(const LayerLayout& layout, int gpus) { return layout.ulysses ? gpus : gpus / layout.group; }

LayerMemory layer_memory(const Scenario& scenario, const LayerStrategy& s, int layer, int gpus, int stage_micro_batch) {
  const StateBytes per_param = state_bytes_per_parameter(scenario.training, scenario.framework);
  const int dg = data_group_of(s.layout, gpus);
  const double n = static_cast<double>(layer_parameters_per_rank(scenario.model, layer, weight_tp(s.layout), 1).dense);
  LayerMemory mem;
  mem.parameters = n * per_param.weights / (zero_shards_weights(s.zero_stage) ? dg : 1);
  mem.gradients = n * per_param.gradients / (zero_shards_gradients(s.zero_stage) ? dg : 1);
  mem.optimizer_states = n * per_param.optimizer / (s.zero_stage >= 1 ? dg : 1);
  const int samples = stage_micro_batch * s.layout.group / gpus;
  mem.activations_per_pass = static_cast<double>(activation_bytes_per_layer(
      scenario.model, scenario.training.seq_length, samples, s.layout.group, s.layout.group > 1, 1, s.recompute));
  return mem;
}

LayerMemory edge_memory(const Scenario& scenario, const LayerStrategy& s, bool embedding, bool output, int pp,
                        int gpus, int stage_micro_batch) {
  const ModelConfig& m = scenario.model;
  const StateBytes per_param = state_bytes_per_parameter(scenario.training, scenario.framework);
  const int dg = data_group_of(s.layout, gpus), tp = weight_tp(s.layout);
  const double tokens = static_cast<double>(stage_micro_batch) * scenario.training.seq_length / gpus;
  double n = 0;
  LayerMemory mem;
  // The TP group's rows: the weight's TP ranks share their tokens (a Ulysses layout holds whole weights).
  const double rows = tokens * tp;
  if (embedding) {
    n += static_cast<double>(embedding_parameters_per_rank(m, tp));
    mem.activations_per_pass += static_cast<double>(embedding_activation_bytes(scenario, rows, tp, tp > 1));
  }
  if (output) {
    n += static_cast<double>(output_parameters_per_rank(m, tp, pp == 1));
    mem.activations_per_pass += static_cast<double>(output_layer_activation_bytes(scenario, rows, tp, tp > 1));
  }
  mem.parameters = n * per_param.weights / (zero_shards_weights(s.zero_stage) ? dg : 1);
  mem.gradients = n * per_param.gradients / (zero_shards_gradients(s.zero_stage) ? dg : 1);
  mem.optimizer_states = n * per_param.optimizer / (s.zero_stage >= 1 ? dg : 1);
  return mem;
}

double stage_fixed_bytes_bound(const Scenario& scenario, const std::vector<LayerStrategy>& options, int stage, int pp,
                               int gpus, int stage_micro_batch, int passes_in_flight) {
  std::set<int> tensor_groups, data_groups;
  const StateBytes per_param = state_bytes_per_parameter(scenario.training, scenario.framework);
  double edges = 0, gathered = 0, gradients_in_flight = 0;
  for (const LayerStrategy& s : options) {
    const LayerMemory e = edge_memory(scenario, s, stage == 0, stage == pp - 1, pp, gpus, stage_micro_batch);
    edges = std::max(edges, e.states() + e.activations_per_pass * passes_in_flight);
    if (s.layout.group > 1) tensor_groups.insert(s.layout.group);
    const int dg = data_group_of(s.layout, gpus);
    if (dg > 1) data_groups.insert(dg);
    const double n = static_cast<double>(layer_parameters_per_rank(scenario.model, 0, weight_tp(s.layout), 1).dense);
    if (s.zero_stage >= 3 && dg > 1) gathered = std::max(gathered, n);
    gradients_in_flight = std::max(gradients_in_flight, zero_gradients_in_flight_bytes(s.zero_stage, dg, per_param, n));
  }
  // NCCL buffers for at most two layouts (a TP and a data group each): plans using more are checked
  // exactly after the DP and dropped when they do not fit.
  const double communicators = static_cast<double>(std::min<std::size_t>(tensor_groups.size(), 2) +
                                                   std::min<std::size_t>(data_groups.size(), 2)) + (pp > 1 ? 1 : 0);
  return edges + communicators * kNcclBytesPerCommunicator + 2.0 * 2 * gathered + gradients_in_flight + kWorkspaceBytes;
}

// What a backward pass of `stage` holds over what was live when it began (backward_peak_over_live, as the uniform
// model counts it): its layers in forward order, then on the last stage the output layer, which holds nothing more.
double backward_over_live(const Scenario& scenario, const PerLayerPlan& plan, int stage, int gpus) {
  const int first = plan.first_layer(stage), last = first + plan.stage_layers[stage] - 1;
  std::vector<double> units, held;
  for (int layer = first; layer <= last; ++layer) {
    const LayerStrategy& s = plan.layers[layer];
    const int samples = plan.stage_micro_batch * s.layout.group / gpus, tp = s.layout.group;
    units.push_back(layer_memory(scenario, s, layer, gpus, plan.stage_micro_batch).activations_per_pass);
    held.push_back(static_cast<double>(layer_backward_held_bytes(scenario.model, scenario.training.seq_length,
                                                                 samples, tp, tp > 1, 1, s.recompute)));
  }
  if (stage == plan.pipeline_stages - 1) {
    units.push_back(edge_memory(scenario, plan.layers[last], false, true, plan.pipeline_stages, gpus,
                                plan.stage_micro_batch).activations_per_pass);
    held.push_back(0);
  }
  return backward_peak_over_live(units, held);
}

MemoryEstimate estimate_per_layer_memory(const Scenario& scenario, const PerLayerPlan& plan) {
  const int gpus = stage_gpus(scenario, plan), pp = plan.pipeline_stages;
  const auto orders = pipeline_schedule(plan.schedule, pp, plan.num_micro_batches, 1);
  const StateBytes per_param = state_bytes_per_parameter(scenario.training, scenario.framework);
  MemoryEstimate estimate;
  for (int stage = 0; stage < pp; ++stage) {
    const int first = plan.first_layer(stage), count = plan.stage_layers[stage];
    std::set<int> tensor_groups, data_groups;
    std::int64_t largest_gathered = 0;
    double gradients_in_flight = 0;
    // The embedding and the output layer take the strategy of the layer beside them.
    LayerMemory total = edge_memory(scenario, plan.layers[first], stage == 0, false, pp, gpus, plan.stage_micro_batch);
    total.add(edge_memory(scenario, plan.layers[first + count - 1], false, stage == pp - 1, pp, gpus,
                          plan.stage_micro_batch));
    for (int layer = first; layer < first + count; ++layer) {
      const LayerStrategy& s = plan.layers[layer];
      total.add(layer_memory(scenario, s, layer, gpus, plan.stage_micro_batch));
      const int dg = data_group_of(s.layout, gpus);
      if (s.layout.group > 1) tensor_groups.insert(s.layout.group);
      if (dg > 1) data_groups.insert(dg);
      const std::int64_t n = layer_parameters_per_rank(scenario.model, layer, weight_tp(s.layout), 1).dense;
      if (s.zero_stage >= 3 && dg > 1) largest_gathered = std::max(largest_gathered, n);  // in use and prefetched
      gradients_in_flight = std::max(gradients_in_flight, zero_gradients_in_flight_bytes(s.zero_stage, dg, per_param,
                                                                                         static_cast<double>(n)));
    }
    MemoryBreakdown mem;
    mem.parameters = std::llround(total.parameters);
    mem.gradients = std::llround(total.gradients);
    mem.optimizer_states = std::llround(total.optimizer_states);
    mem.activations = std::llround(total.activations_per_pass * peak_in_flight_passes(orders[stage]) +
                                   backward_over_live(scenario, plan, stage, gpus));
    const int communicators = static_cast<int>(tensor_groups.size() + data_groups.size()) + (pp > 1 ? 1 : 0);
    mem.communication_buffers =
        std::llround(communicators * kNcclBytesPerCommunicator + 2.0 * 2 * largest_gathered + gradients_in_flight);
    mem.workspace = std::llround(kWorkspaceBytes);
    mem.outside_allocations = std::llround(communicators * kNcclBytesPerCommunicator + kCudaContextBytes);
    estimate.per_stage.push_back(mem);
    if (mem.total() > estimate.per_stage[estimate.worst_stage].total()) estimate.worst_stage = stage;
  }
  return estimate;
}

Strategy home_strategy(const Scenario& scenario, const PerLayerPlan& plan) {
  // The most common layer strategy; ties go to the one that comes first.
  std::map<std::string, int> counts;
  for (const LayerStrategy& s : plan.layers) ++counts[to_string(s)];
  const LayerStrategy* home = &plan.layers.front();
  for (const LayerStrategy& s : plan.layers)
    if (counts[to_string(s)] > counts[to_string(*home)]) home = &s;
  const int gpus = stage_gpus(scenario, plan);
  const int tp = weight_tp(home->layout);
  Strategy st;
  st.tensor_model_parallel_size = tp;
  st.pipeline_model_parallel_size = plan.pipeline_stages;
  st.data_parallel_size = gpus / tp;
  st.sequence_parallel = tp > 1;
  // Samples per data-parallel rank; a Ulysses home with fewer samples than GPUs rounds up to one.
  st.micro_batch_size = std::max(1, plan.stage_micro_batch * tp / gpus);
  st.num_micro_batches = plan.num_micro_batches;
  st.zero_stage = home->zero_stage;
  st.recompute = home->recompute;
  st.schedule = plan.schedule;
  return st;
}

Throughput per_layer_throughput(const Scenario& scenario, const PerLayerPlan& plan, const Strategy& home,
                                double iteration_s) {
  Throughput t = throughput(scenario, home, iteration_s);
  const double model = model_flops_per_iteration(scenario);
  double hardware = model;
  for (const LayerStrategy& s : plan.layers)
    hardware += (hardware_flops_per_iteration(scenario, s.recompute) - model) / static_cast<double>(plan.layers.size());
  t.hfu = t.mfu * hardware / model;
  return t;
}

}  // namespace twin
