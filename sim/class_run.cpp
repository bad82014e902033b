#include "sim/class_run.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

namespace twin::sim {

IterationResult iteration_result(std::vector<ClassRun>& classes, std::uint64_t events) {
  IterationResult result;
  result.events = events;
  result.classes.resize(classes.size());
  for (std::size_t c = 0; c < classes.size(); ++c) {
    ClassRun& run = classes[c];
    run.clock.advance(run.finish_ns);
    ClassResult& out = result.classes[c];
    out.finish_ns = run.finish_ns;
    out.breakdown = run.clock.breakdown();
    out.communication_busy_ns = run.clock.communication_busy_ns();
    out.op_timings = std::move(run.timings);
    if (out.finish_ns > result.iteration_ns) {
      result.iteration_ns = out.finish_ns;
      result.critical_class = static_cast<int>(c);
    }
  }
  if (!result.classes.empty()) result.breakdown = result.classes[result.critical_class].breakdown;
  return result;
}

void report_deadlock(const FlatIteration& flat, const IterationGraph& graph, const std::vector<ClassRun>& classes) {
  std::string message = "simulation deadlock (a lowering bug): ";
  bool first = true;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    const ClassRun& run = classes[c];
    if (run.done == run.state.size()) continue;
    const auto stuck = static_cast<std::uint32_t>(
        std::find_if(run.state.begin(), run.state.end(), [](OpState s) { return s != OpState::done; }) -
        run.state.begin());
    const FlatOp& op = flat.classes[c].ops[stuck];
    const RankClass& lowered = graph.classes[c];
    message += (first ? "" : "; ") + (stuck < lowered.size() ? op_name(lowered.op(stuck)) : "an op") + " (" +
               op_id(static_cast<int>(c), stuck) + ")";
    if (run.state[stuck] == OpState::waiting_peer)
      message += " waits for its peer " + op_id(op.peer_class, op.peer_op);
    else
      message += " waits for " + std::to_string(run.pending[stuck]) + " unfinished predecessor(s)";
    first = false;
  }
  throw std::logic_error(message);
}

}  // namespace twin::sim
