#include "sim/horizon.hpp"

#include <stdexcept>

namespace twin::sim {

void beyond_horizon() {
  throw std::range_error(
      "the simulated iteration would last more than 1e17 ns (3 years): a speed or bandwidth of the scenario's "
      "cluster or of the profile is implausibly small");
}

}  // namespace twin::sim
