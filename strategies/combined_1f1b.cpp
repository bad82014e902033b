// The issue order of a layer pair in Megatron's combined 1F1B. Each strand is cut at its two EP all-to-alls into
// five runs; the runs are issued as TransformerLayerSchedulePlan.run calls the nodes, and each stream runs what it
// is given in issue order (the engine's rule too), so the order alone places every op where Megatron's streams
// put it.
#include "strategies/combined_1f1b.hpp"

namespace twin {
namespace {

// The indices of a strand's EP all-to-alls when they are `first` then `second` (by role), else nullopt.
std::optional<std::pair<int, int>> all_to_alls(std::span<const Op> ops, OpRole first, OpRole second) {
  std::vector<int> found;
  for (int k = 0; k < static_cast<int>(ops.size()); ++k)
    if (ops[k].kind == OpKind::all_to_all && ops[k].group == GroupKind::expert) found.push_back(k);
  if (found.size() != 2 || ops[found[0]].role != first || ops[found[1]].role != second) return std::nullopt;
  return std::pair{found[0], found[1]};
}

// A weight-gradient GEMM, or the add of its product into the main gradient that follows it without gradient
// accumulation fusion: delayed together.
bool is_weight_gradient(const Op& op) {
  return (op.kind == OpKind::gemm && op.gemm_pass == GemmPass::weight_gradient) || op.role == OpRole::grad_accumulation;
}

}  // namespace

std::optional<std::vector<IssuedOp>> combined_layer_order(std::span<const Op> forward, std::span<const Op> backward,
                                                          bool delay_wgrad_compute) {
  const auto f = all_to_alls(forward, OpRole::dispatch, OpRole::combine);
  const auto b = all_to_alls(backward, OpRole::combine, OpRole::dispatch);
  if (!f || !b) return std::nullopt;
  const auto [f_dispatch, f_combine] = *f;
  const auto [b_combine, b_dispatch] = *b;
  std::vector<IssuedOp> order;
  order.reserve(forward.size() + backward.size());
  const auto issue = [&](bool from_backward, int begin, int end) {
    for (int k = begin; k < end; ++k) order.push_back({from_backward, k});
  };
  issue(true, 0, b_combine + 1);                     // what precedes the combine backward, and it
  issue(false, 0, f_dispatch + 1);                   // pre_dispatch forward, then the dispatch
  int last_compute = -1;                             // the experts' backward, their weight gradients last if delayed
  for (int k = b_combine + 1; k < b_dispatch; ++k) {
    if (delay_wgrad_compute && is_weight_gradient(backward[k])) continue;
    order.push_back({true, k});
    if (!backward[k].is_communication()) last_compute = k;
  }
  order.push_back({true, b_dispatch, delay_wgrad_compute ? -1 : last_compute});
  if (delay_wgrad_compute)
    for (int k = b_combine + 1; k < b_dispatch; ++k)
      if (is_weight_gradient(backward[k])) order.push_back({true, k});
  issue(false, f_dispatch + 1, f_combine + 1);        // the experts forward, then the combine
  issue(true, b_dispatch + 1, static_cast<int>(backward.size()));  // pre_dispatch backward
  issue(false, f_combine + 1, static_cast<int>(forward.size()));   // the unpermutation and what follows
  return order;
}

}  // namespace twin
