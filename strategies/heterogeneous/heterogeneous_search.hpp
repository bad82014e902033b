// The heterogeneous family's search (HexiScale on a mixed cluster): split the GPUs into tensor-parallel
// groups inside nodes, deal the groups into pipelines (each GPU kind in pipelines of its own, or every
// pipeline a mix of all kinds), order each pipeline's stages memory-rich first, give faster stages more
// layers under each stage's memory, give faster pipelines more micro-batches, estimate each plan from
// priced kernels and simulate the most promising ones in the event engine.
#pragma once
#include <string>
#include <vector>

#include "cost/profile.hpp"
#include "core/scenario.hpp"
#include "strategies/search.hpp"

namespace twin {

// One micro-batch's forward and backward work of one unit on one TP group of a node group's GPUs:
// its compute ops priced by the profile on that GPU, its TP collectives on that node's links, in series.
struct StageCosts {
  double layer_ns = 0;
  double embedding_ns = 0;
  double head_ns = 0;
};
StageCosts stage_costs(const Scenario& scenario, const Profile& profile, int node_group, int tp,
                       const Strategy& shared, int micro_batch_size);

// Layers per stage minimising the slowest stage's time n_s * layer_ns[s] + extra_ns[s], every stage at
// least one layer and at most max_layers[s]: one layer at a time to the stage it delays least (optimal
// for this min-max). Empty when the stages cannot hold num_layers.
std::vector<int> assign_layers(int num_layers, const std::vector<double>& layer_ns, const std::vector<double>& extra_ns,
                               const std::vector<int>& max_layers);

// Micro-batches per pipeline minimising the slowest pipeline's (m_p + stages_p - 1) * micro_batch_ns[p]
// (a pipeline's fill, steady state and drain), each at least one. Empty when there are fewer micro-batches
// than pipelines.
std::vector<int> assign_micro_batches(int micro_batches, const std::vector<double>& micro_batch_ns,
                                      const std::vector<int>& stages);

// A tensor-parallel group: `tp` consecutive GPUs of one node.
struct TpGroup {
  int node_group = 0;
  int node = 0;
  std::vector<int> devices;
};
// Every node group's GPUs cut into TP groups of tp_of_group[g] (which must divide its gpus_per_node).
std::vector<TpGroup> tensor_parallel_groups(const Cluster& cluster, const std::vector<int>& tp_of_group);

// How TP groups become pipelines.
//   split: node group g's TP groups form pipelines_of_group[g] pipelines of consecutive groups.
//   mixed: every node group's TP groups are dealt round-robin into `pipelines` pipelines, so each
//          pipeline holds a share of every kind.
// Within a pipeline, stages go GPU memory first (first stages keep the most micro-batches in flight),
// then by rank. Empty when a count does not divide the TP groups.
std::vector<std::vector<TpGroup>> split_pipelines(const Cluster& cluster, const std::vector<TpGroup>& groups,
                                                  const std::vector<int>& pipelines_of_group);
std::vector<std::vector<TpGroup>> mixed_pipelines(const Cluster& cluster, const std::vector<TpGroup>& groups,
                                                  int pipelines);

// The searched asymmetric plans, simulated (the most promising by estimate, at most `simulate_top`).
std::vector<Candidate> heterogeneous_candidates(const Scenario& scenario, const Profile& profile, int jobs,
                                                int simulate_top = 8);

// The family's search (a FamilySearch): with strategy.pipelines the fixed plan alone; on a mixed cluster
// with no pinned strategy the searched plans; else nothing.
std::vector<Candidate> heterogeneous_family_candidates(const Scenario& scenario, const Profile& profile, int jobs);

}  // namespace twin
