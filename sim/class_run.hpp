// A rank class's state while the engine runs it (sim/engine.cpp), and what becomes of it at the end: the
// iteration's result, or the report of a deadlock naming each class's stuck op.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "core/op_graph.hpp"
#include "sim/breakdown.hpp"
#include "sim/flat_graph.hpp"
#include "sim/result.hpp"

namespace twin::sim {

enum class OpState : std::uint8_t { blocked, waiting_peer, running, done };

struct ClassRun {
  std::vector<std::uint32_t> pending;    // unfinished predecessors
  std::vector<OpState> state;
  std::vector<OpTiming> timings;
  ClassClock clock;
  std::array<int, 3> active_by_kernel{};  // active communication ops by CommKernel (how they slow compute)
  // The interference rows of its active NCCL ops and the bands of its active compute ops (sim/interference_grid.hpp).
  std::vector<std::uint8_t> active_rows, active_bands;
  // Per group kind, the class's compute time (its breakdown's) when a collective of that group last aligned its
  // ranks: what they have drifted apart over since (sim/rank_drift.hpp). 0: the iteration's start.
  std::array<TimeNs, kGroupKindCount> aligned_compute_ns{};
  TimeNs finish_ns = 0;
  std::size_t done = 0;
  bool dirty = false;
};

// The iteration's result from its classes' runs after the last event (their op timings are moved out).
IterationResult iteration_result(std::vector<ClassRun>& classes, std::uint64_t events);

// Throws std::logic_error naming, in each unfinished class, the first op not done and what it waits for.
// `graph` names ops where it holds them (a graph lowered class by class holds only its last class's ops).
[[noreturn]] void report_deadlock(const FlatIteration& flat, const IterationGraph& graph,
                                  const std::vector<ClassRun>& classes);

}  // namespace twin::sim
