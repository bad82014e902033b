// The NCCL communicators of one rank, split from the world communicator by the groups of
// strategies/rank_layout.hpp (Megatron's rank order: tensor fastest, then context, data, pipeline). One
// communicator per stream that uses it: NCCL serialises the work of a communicator, and two streams sharing
// one could deadlock. Pipeline p2p gets one communicator per ordered stage pair, used by the sender's pp_send
// stream and the receiver's pp_recv stream only. A per-layer plan's layers of other tensor-parallel sizes
// get their layout's tensor and data groups too. An asymmetric plan's groups are its stages, pipelines, stage
// boundaries and reduction sets (executor/explicit_groups.hpp).
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nccl.h>

#include "core/op_graph.hpp"
#include "core/strategy.hpp"
#include "executor/explicit_groups.hpp"
#include "executor/stage_boundary.hpp"
#include "strategies/rank_layout.hpp"

namespace twin::exec {

// Ordered (sender stage, receiver stage) pairs that the graph's sends use, sorted.
std::vector<std::pair<int, int>> p2p_stage_pairs(const IterationGraph& graph);

class Communicators {
 public:
  // Collective over all `world_size` ranks (each calls it with the same unique id, graph, strategy and
  // layouts). `layouts`: strategies of the same stages whose tensor-parallel sizes differ from `strategy`'s
  // (a per-layer plan's; strategies/families/plan_graphs.hpp), one per size.
  Communicators(const Strategy& strategy, const IterationGraph& graph, int rank, int world_size, ncclUniqueId id,
                const std::vector<Strategy>& layouts = {});
  // The groups of another layout of the same GPUs (a hot-switching phase's), split from `parent`'s world.
  Communicators(const Strategy& strategy, const IterationGraph& graph, int rank, int world_size,
                const Communicators& parent);
  // An asymmetric plan's: each stage's TP group, each pipeline's GPUs (the gradient norm), each boundary's two
  // stages, and each set of GPUs reducing the same gradients across pipelines (executor/pipeline_reduction.hpp).
  Communicators(const ExplicitGroups& groups, int rank, int world_size, ncclUniqueId id);
  ~Communicators();
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;

  // The groups of a layout of `tensor_size` GPUs: its tensor group (tp_comm stream), the same for the
  // optimizer phase, and its data group (dp_comm stream).
  struct Layout {
    ncclComm_t tensor = nullptr, tensor_optimizer = nullptr, data = nullptr;
  };
  const Layout& layout(int tensor_size) const;

  ncclComm_t world() const { return world_; }
  // Hot switching's re-sharding transfers between any two GPUs (a copy of the world on the compute stream of the
  // part switched into); null unless the plan has parts of different layouts (`with_resharding`).
  ncclComm_t resharding() const { return resharding_; }
  void make_resharding();  // collective: every rank calls it, in the same place
  ncclComm_t tensor() const { return tensor_; }        // tp_comm stream
  ncclComm_t data() const { return data_; }            // dp_comm stream
  ncclComm_t embedding() const { return embedding_; }  // dp_comm stream (first and last stage); null if none
  // Expert parallelism: the EP group (ep_comm stream: the routed tokens' all-to-alls) and the expert-data group
  // (dp_comm stream: the experts' gradients and weights); null where the graph has no such op.
  ncclComm_t expert() const { return expert_; }
  ncclComm_t expert_data() const { return expert_data_; }
  // Context parallelism's ring (cp_comm stream: the key-value blocks and their gradients); null without one.
  ncclComm_t context() const { return context_; }
  // FP8 delayed scaling's amax group (the stage's TP x CP x DP GPUs: Megatron's amax-reduction group; dp_comm
  // stream); null where the graph reduces no amax.
  ncclComm_t amax() const { return amax_; }
  // Optimizer-phase reductions (gradient norm, SP norm-weight gradients) over TP and PP.
  ncclComm_t tensor_for_optimizer() const { return tensor_optimizer_; }
  ncclComm_t pipeline_for_optimizer() const { return pipeline_optimizer_; }
  // Optimizer-phase reduction of the gradient norm over the whole pipeline at once (an asymmetric plan's, whose
  // stages differ in TP size) instead of over TP then PP.
  bool norm_over_whole_pipeline() const { return norm_over_whole_pipeline_; }
  // A stage boundary's communicator (a uniform pipeline's: this GPU and its peer; an asymmetric plan's: both
  // stages' GPUs), its sides and this GPU's place in it.
  struct Boundary {
    ncclComm_t comm = nullptr;
    BoundarySides sides;
    int position = 0;
    // The sides split the micro-batch's rows (an asymmetric plan's); else each GPU moves the rows it holds.
    bool micro_batch_rows = false;
  };
  const Boundary& boundary(int from_stage, int to_stage) const;
  // The communicator of the GPUs holding the same gradients across an asymmetric plan's pipelines.
  ncclComm_t reduction(const std::vector<int>& ranks) const;
  // The first asynchronous NCCL error of any communicator, empty when none.
  std::string async_error() const;
  // Aborts every communicator (after an error or a timeout): pending NCCL work returns.
  void abort_all();

 private:
  ncclComm_t split(int color, int key);
  void make_groups(const Strategy& strategy, const IterationGraph& graph, int rank, const std::vector<Strategy>& layouts);
  std::vector<ncclComm_t> owned_;
  ncclComm_t world_ = nullptr, tensor_ = nullptr, data_ = nullptr, embedding_ = nullptr;
  ncclComm_t expert_ = nullptr, expert_data_ = nullptr, context_ = nullptr, amax_ = nullptr;
  ncclComm_t tensor_optimizer_ = nullptr, pipeline_optimizer_ = nullptr, resharding_ = nullptr;
  // Split of the world by `groups` (disjoint): this rank's group's communicator, null when in none.
  ncclComm_t split_groups(const std::vector<std::vector<int>>& groups);
  std::map<std::pair<int, int>, Boundary> p2p_;
  std::map<std::vector<int>, ncclComm_t> reductions_;
  bool norm_over_whole_pipeline_ = false;
  std::map<int, Layout> layouts_;  // by tensor-parallel size, the strategy's included
  RankCoordinates me_;
  int me_rank_ = 0;
};

}  // namespace twin::exec
