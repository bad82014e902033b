// The pace of a ring across nodes (the law and its fit in the header).
#include "sim/ring_pace.hpp"

#include <algorithm>
#include <cmath>

#include "core/units.hpp"
#include "cost/collective_steps.hpp"

namespace twin::sim {
namespace {

// nccl-tests #309: 156.9 us / 30 steps on 2 nodes; #322: 19,355 us / 2,046 steps on 128 nodes.
constexpr double kStepUsOnTwoNodes = 156.9 / 30;
constexpr double kStepUsPerDoubling = (19355.0 / 2046 - kStepUsOnTwoNodes) / 6;

}  // namespace

double ring_pace_floor_ns(OpKind kind, const GroupSpan& span) {
  const int nodes = std::max(span.nodes, 1);
  if (nodes <= 1) return 0;
  const double step_us = kStepUsOnTwoNodes + kStepUsPerDoubling * std::log2(nodes / 2.0);
  return algorithm_steps(kind, std::max(span.size, 1)) * step_us * kNsPerUs;
}

}  // namespace twin::sim
