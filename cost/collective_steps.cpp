// The ring's steps by collective; the bus factor follows from them, since each ring step moves S/n.
#include "cost/collective_steps.hpp"

#include <optional>
#include <stdexcept>
#include <string>

namespace twin {
namespace {

// Ring steps of S/n each for the four collectives; one step of all of S for a send or receive.
struct Steps {
  int count;
  bool point_to_point;
};

Steps ring_steps(OpKind kind, int ranks, const char* caller) {
  const std::optional<Collective> collective = collective_of(kind);
  if (!collective) throw std::invalid_argument(std::string(caller) + ": not a collective: " + to_string(kind));
  switch (*collective) {
    case Collective::all_reduce: return {2 * (ranks - 1), false};
    case Collective::all_gather:
    case Collective::reduce_scatter:
    case Collective::all_to_all: return {ranks - 1, false};
    case Collective::send:
    case Collective::recv: return {1, true};
  }
  throw std::logic_error("ring_steps: unknown collective");
}

}  // namespace

int algorithm_steps(OpKind collective, int ranks) { return ring_steps(collective, ranks, "algorithm_steps").count; }

double busbw_factor(OpKind collective, int ranks) {
  const Steps steps = ring_steps(collective, ranks, "busbw_factor");
  if (steps.point_to_point) return 1.0;
  // steps / n: the same double as nccl-tests' 2.0 * (n - 1) / n, both operands of the one rounding division exact.
  return steps.count / static_cast<double>(ranks);
}

}  // namespace twin
