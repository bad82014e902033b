// The op graphs flattened once per simulation, so that the event loop touches only plain arrays:
// successors in CSR form and the next op of the same stream, dependency counts, nominal compute
// times, collective plans (measured tables of the profile, else the tuner), and the two ends of every
// pipeline transfer.
// Flattening is where lowering bugs surface: it throws std::logic_error for an unmatched send or recv,
// a send and recv of classes of equal size that disagree on bytes, a collective without a group or
// whose group span disagrees with its group_size.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "cost/profile.hpp"
#include "core/cluster.hpp"
#include "core/op_graph.hpp"
#include "sim/collectives.hpp"
#include "sim/interference_grid.hpp"

namespace twin::sim {
class PriceCache;
}

namespace twin::sim {

inline constexpr std::uint32_t kNoNextInStream = 0xffffffffu;

enum class OpClass : std::uint8_t { compute, collective, pipeline_send, pipeline_recv, ring_send };

struct FlatOp {
  TimeNs nominal_ns = 0;                 // compute: time alone on the GPU
  std::uint32_t successors_begin = 0;    // range in FlatClass::successors: the graph's edges
  std::uint32_t successors_end = 0;
  std::uint32_t next_in_stream = kNoNextInStream;  // stream order: released after the edges' successors
  std::uint32_t plan = 0;                // collective, context or pipeline send: index in FlatClass::plans
  std::int32_t peer_class = -1;          // pipeline send/recv: the class and op of the other end
  std::uint32_t peer_op = 0;
  double message_bytes = 0;              // communication: the nccl-tests size, for link efficiency
  // Pipeline send between classes of different sizes (asymmetric plans: stages or pipelines with other
  // TP sizes): the receiver's bytes per GPU over the sender's. The flow carries the sender's bytes and
  // the receiving side's capacity is divided by this, so each side moves its own bytes.
  double receive_scale = 1.0;
  OpClass kind = OpClass::compute;
  bool optimizer = false;                // Phase::optimizer: charged to the optimizer in the breakdown
  // Communication: what moves the bytes, and so how much the compute beside it slows (FlatClass).
  CommKernel comm_kernel = CommKernel::nccl;
  bool host_work = false;                // Op::host_ns > 0: its time is in FlatClass::host_work
  GroupKind group = GroupKind::none;     // collective: its communicator (sim/rank_drift.hpp aligns per kind)
  // Compute: its band of FlatIteration::interference; NCCL communication: its row (sim/interference_grid.hpp).
  std::uint8_t interference = 0;
};

// An op's host time (Op::host_ns), kept beside the ops: few ops have one (a FlatOp field would add 8 bytes to
// every one of millions).
struct HostWork {
  std::uint32_t op = 0;
  TimeNs host_ns = 0;
};

struct FlatClass {
  std::vector<FlatOp> ops;
  // Per op, its in-edges plus the previous op of its stream: the engine starts from a copy of these, which a
  // field of FlatOp read at a 56-byte stride made a pass over every op.
  std::vector<std::uint32_t> predecessors;
  std::vector<std::uint32_t> successors;
  std::vector<CollectivePlan> plans;     // deduplicated: ops of equal kind, bytes and span share one
  std::vector<HostWork> host_work;       // in op order: the ops with host time
  // Per op, when the host has issued it (the ops' Op::dispatch_ns summed in op order, which is issue order); empty
  // when no op of the class has dispatch time.
  std::vector<TimeNs> issue_at_ns;
  TimeNs host_ns(std::uint32_t op) const;  // of an op with host_work set
  LinkParams links;                      // this class's GPUs
  // Compute slows by this while a userbuffers kernel runs on kUserbuffersSmCount of the GPU's SMs (the GEMM
  // beside it is launched without them): sm_count / (sm_count - kUserbuffersSmCount).
  double userbuffers_slowdown = 1.0;
  // Ranks that drift apart (sim/rank_drift.hpp): this class's GPUs' parameters, and per group kind e_n of the
  // group's rank count (0 with the drift off or a group of one).
  RankDrift drift;
  std::array<double, kGroupKindCount> drift_max_of_n{};
};

struct FlatIteration {
  std::vector<FlatClass> classes;
  InterferenceGrid interference;  // how a class's NCCL communication and compute slow each other
};

// `prices`, when given, is shared with the other simulations of a search (sim/price_cache.hpp).
FlatIteration flatten(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                      PriceCache* prices = nullptr);

// flatten() a class at a time, for a lowering that hands over its classes one after another and lowers the next
// into the same storage (strategies/lowering.hpp, lower_class_by_class): each class's ops are read only while it
// is added, and what pairing the pipeline transfers needs of them is kept. The same result as flatten().
class Flattener {
 public:
  // `storage`: a flattened iteration no longer needed, whose arrays the new one is written into (a fresh page is a
  // page fault when first written: a tenth of a 64-stage pipeline's replay).
  Flattener(const Cluster& cluster, const Profile& profile, PriceCache* prices = nullptr, FlatIteration storage = {});
  ~Flattener();
  // graph.classes[c], placed and lowered; `graph` holds every class of the iteration, the others at least placed
  // by the time of finish().
  void add(const IterationGraph& graph, int c);
  // Once every class is added: pairs the pipeline transfers (their ends' classes may be emptied by now).
  FlatIteration finish(const IterationGraph& graph);

 private:
  struct State;
  const Cluster& cluster_;
  const Profile& profile_;
  PriceCache* prices_;
  std::unique_ptr<State> state_;
};

// A rank class's compute ops priced one after another (their nominal times summed), with the communication its
// compute stream must wait through (below): those of the optimizer phase, which run once per iteration, apart from
// the others. The engine runs no compute op faster than its price and shares a GPU among the compute ops in
// progress (sim/engine.hpp), so no class finishes an iteration sooner than the sum of both: a lower bound that needs
// no event replay.
//
// Waited-through communication: a collective (or ring step) C that waits for compute op A and that the next
// compute op B of the same stream waits for, A and B in one pass (micro-batch, chunk, forward or backward) or both
// in the optimizer phase: the stream idles from A's end to B's start, at least C's time alone on its links (no
// flow shares them, no compute beside it to slow it: what the engine gives is never shorter). Counted in the pass
// of B, the largest C where several sit between A and B; not with two compute streams (double strand), where the
// other strand may fill the wait. Mostly the TP collectives without userbuffers and the loss all-reduce.
struct PassCompute {
  TimeNs forward_ns = 0;     // forward passes (a recomputed forward runs in the backward pass: not here)
  TimeNs backward_ns = 0;    // backward passes, recomputed forwards included
  TimeNs recomputed_ns = 0;  // the recomputed forwards alone
  TimeNs total_ns() const { return forward_ns + backward_ns; }
  void add(const Op& op, TimeNs ns);  // a compute op (or the wait before it) outside the optimizer phase
};
struct ComputeBusy {
  int stage = 0;
  TimeNs optimizer_ns = 0;
  PassCompute passes;       // every chunk's
  // Chunk 0's alone (all of them with one chunk per stage): a pipeline fills and drains through chunk 0
  // (strategies/lower_bound.cpp).
  PassCompute first_chunk;
  TimeNs other_ns() const { return passes.total_ns(); }  // all but the optimizer phase
};
std::vector<ComputeBusy> compute_busy(const IterationGraph& graph, const Cluster& cluster, const Profile& profile,
                                      PriceCache* prices = nullptr);
// Class c's alone (the only class compute_busy reads of `graph`: one lowered class by class will do).
// `count_waits` false: compute alone, for a schedule that runs other passes' compute through those waits.
ComputeBusy compute_busy_of(const IterationGraph& graph, int c, const Cluster& cluster, const Profile& profile,
                            PriceCache* prices = nullptr, bool count_waits = true);

// Link parameters of a node group: bandwidths from the cluster; efficiency and per-step latency from the
// profile (its PCIe intra-node curve for PCIe nodes), the latency no lower than the cluster declares.
LinkParams link_params(const NodeGroup& group, const Network& network, const Profile& profile);

}  // namespace twin::sim
