// all_reduce as reduce-scatter then all-gather around a ring: 2 (n-1) steps of S/n each; all_gather,
// reduce_scatter and the direct all_to_all: n-1 steps; send/recv: one.
#include "cost/collective_steps.hpp"

#include <stdexcept>
#include <string>

namespace twin {

double busbw_factor(OpKind collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case OpKind::all_reduce: return 2.0 * (n - 1) / n;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return (n - 1) / n;
    case OpKind::send:
    case OpKind::recv: return 1.0;
    default: throw std::invalid_argument("busbw_factor: not a collective: " + to_string(collective));
  }
}

int algorithm_steps(OpKind collective, int ranks) {
  switch (collective) {
    case OpKind::all_reduce: return 2 * (ranks - 1);
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return ranks - 1;
    case OpKind::send:
    case OpKind::recv: return 1;
    default: throw std::invalid_argument("algorithm_steps: not a collective: " + to_string(collective));
  }
}

}  // namespace twin
