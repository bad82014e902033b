// The combinatorial half of the heterogeneous search: TP groups inside nodes, pipelines from them, layers
// to stages and micro-batches to pipelines (both min-max greedy).
#include <algorithm>
#include <numeric>

#include "strategies/heterogeneous/heterogeneous_search.hpp"

namespace twin {

std::vector<int> assign_layers(int num_layers, const std::vector<double>& layer_ns, const std::vector<double>& extra_ns,
                               const std::vector<int>& max_layers) {
  const std::size_t stages = layer_ns.size();
  if (stages == 0 || static_cast<int>(stages) > num_layers) return {};
  std::vector<int> layers(stages, 1);
  for (std::size_t s = 0; s < stages; ++s)
    if (max_layers[s] < 1) return {};
  for (int placed = static_cast<int>(stages); placed < num_layers; ++placed) {
    std::size_t best = stages;
    double best_ns = 0;
    for (std::size_t s = 0; s < stages; ++s) {
      if (layers[s] >= max_layers[s]) continue;
      const double ns = (layers[s] + 1) * layer_ns[s] + extra_ns[s];
      if (best == stages || ns < best_ns) {
        best = s;
        best_ns = ns;
      }
    }
    if (best == stages) return {};
    ++layers[best];
  }
  return layers;
}

std::vector<int> assign_micro_batches(int micro_batches, const std::vector<double>& micro_batch_ns,
                                      const std::vector<int>& stages) {
  const std::size_t pipelines = micro_batch_ns.size();
  if (pipelines == 0 || static_cast<int>(pipelines) > micro_batches) return {};
  std::vector<int> counts(pipelines, 1);
  for (int placed = static_cast<int>(pipelines); placed < micro_batches; ++placed) {
    std::size_t best = 0;
    double best_ns = 0;
    for (std::size_t p = 0; p < pipelines; ++p) {
      const double ns = (counts[p] + 1 + stages[p] - 1) * micro_batch_ns[p];
      if (p == 0 || ns < best_ns) {
        best = p;
        best_ns = ns;
      }
    }
    ++counts[best];
  }
  return counts;
}

std::vector<TpGroup> tensor_parallel_groups(const Cluster& cluster, const std::vector<int>& tp_of_group) {
  std::vector<TpGroup> groups;
  int rank = 0;
  for (int g = 0; g < static_cast<int>(cluster.node_groups.size()); ++g) {
    const NodeGroup& group = cluster.node_groups[g];
    const int tp = tp_of_group[g];
    for (int i = 0; i < group.count * group.gpus_per_node; i += tp) {
      TpGroup t{g, cluster.node_of_rank(rank + i), {}};
      for (int k = 0; k < tp; ++k) t.devices.push_back(rank + i + k);
      groups.push_back(std::move(t));
    }
    rank += group.count * group.gpus_per_node;
  }
  return groups;
}

namespace {

void order_stages(const Cluster& cluster, std::vector<TpGroup>& stages) {
  std::stable_sort(stages.begin(), stages.end(), [&](const TpGroup& a, const TpGroup& b) {
    const double ma = cluster.node_groups[a.node_group].gpu.memory_GiB;
    const double mb = cluster.node_groups[b.node_group].gpu.memory_GiB;
    if (ma != mb) return ma > mb;
    return a.devices.front() < b.devices.front();
  });
}

}  // namespace

std::vector<std::vector<TpGroup>> split_pipelines(const Cluster& cluster, const std::vector<TpGroup>& groups,
                                                  const std::vector<int>& pipelines_of_group) {
  std::vector<std::vector<TpGroup>> pipelines;
  for (int g = 0; g < static_cast<int>(cluster.node_groups.size()); ++g) {
    std::vector<TpGroup> of_group;
    for (const TpGroup& t : groups)
      if (t.node_group == g) of_group.push_back(t);
    const int count = pipelines_of_group[g];
    if (count < 1 || of_group.size() % count != 0) return {};
    const std::size_t per = of_group.size() / count;
    for (int p = 0; p < count; ++p)
      pipelines.emplace_back(of_group.begin() + p * per, of_group.begin() + (p + 1) * per);
  }
  for (auto& stages : pipelines) order_stages(cluster, stages);
  return pipelines;
}

std::vector<std::vector<TpGroup>> mixed_pipelines(const Cluster& cluster, const std::vector<TpGroup>& groups,
                                                  int pipelines) {
  if (pipelines < 1) return {};
  std::vector<std::vector<TpGroup>> out(static_cast<std::size_t>(pipelines));
  for (int g = 0; g < static_cast<int>(cluster.node_groups.size()); ++g) {
    int dealt = 0;
    for (const TpGroup& t : groups)
      if (t.node_group == g) out[dealt++ % pipelines].push_back(t);
    if (dealt % pipelines != 0) return {};
  }
  for (auto& stages : out) order_stages(cluster, stages);
  return out;
}

}  // namespace twin
