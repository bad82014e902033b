// The dispatch time is spread over a pass's ops evenly because the host's time per kernel varies little next to
// the per-layer total that was measured (tests/gpu/pytorch_host_cost.py), and a pass's kernels are what the host
// issues one after another; what matters to the step is when the host falls behind the GPU, a pass at a time.
#include "strategies/pytorch_fsdp2.hpp"

#include <cstdlib>
#include <set>

namespace twin::lowering {

// Per element, forward and backward (see the header for the count).
EagerPassBytes eager_norm_bytes(Normalization normalization) {
  switch (normalization) {
    case Normalization::rmsnorm: return {36 - 4, 64 - 6};
    case Normalization::layernorm: return {0, 4};
  }
  return {};
}

EagerPassBytes eager_activation_bytes(Activation activation) {
  switch (activation) {
    case Activation::swiglu:
    case Activation::geglu: return {10 - 6, 18 - 10};
    case Activation::gelu: return {0, 0};
    case Activation::squared_relu: return {8 - 4, 16 - 6};
    case Activation::quick_geglu: return {32 - 6, 52 - 10};
  }
  return {};
}

void emit_eager_passes(Emitter& e, Op fused, std::int64_t extra_bytes_per_element) {
  const RankShapes& s = e.shapes();
  if (!s.pytorch_fsdp || s.kernels != PytorchKernels::eager) return;
  if (const std::int64_t bytes = extra_bytes_per_element * fused.rows * fused.cols; bytes > 0)
    e.emit(Emitter::moved(OpKind::elementwise, fused.role, bytes));
}

Op fsdp_copy(OpRole role, Stream stream, std::int64_t bytes, std::int32_t parameter_unit) {
  Op op = Emitter::moved(OpKind::elementwise, role, bytes);
  op.stream = stream;
  op.parameter_unit = parameter_unit;
  return op;
}

const PytorchHostCost& pytorch_host_cost(int tp, Recompute recompute, bool compiled) {
  const bool full = recompute == Recompute::full;
  const PytorchHostCost* best = &kPytorchHostCosts.front();
  const auto distance = [&](const PytorchHostCost& c) {
    return (c.compiled != compiled) * 1000 + (c.full_recompute != full) * 100 + std::abs(c.tp - tp);
  };
  for (const PytorchHostCost& c : kPytorchHostCosts)
    if (distance(c) < distance(*best)) best = &c;
  return *best;
}

namespace {

enum class HostPart { forward, backward, optimizer, fixed, none };

// Which of the host's measured parts issues `op`: the data-parallel stream's gathers, reductions and copies, and
// the copy out of a gather, are issued by FSDP2's hooks beside the pass and carry none (so every layer's pass has as
// many ops that do, the last layer's backward without a gather included).
HostPart host_part(const Op& op) {
  if (op.stream == Stream::dp_comm || op.role == OpRole::param_gather) return HostPart::none;
  if (op.phase == Phase::optimizer) return HostPart::optimizer;
  if (op.layer < 0) return HostPart::fixed;
  return op.phase == Phase::backward || op.recomputed ? HostPart::backward : HostPart::forward;
}

}  // namespace

void assign_pytorch_dispatch(RankClass& rc, const RankShapes& shapes) {
  // The ops of one layer's passes for one micro-batch (every layer's and micro-batch's are alike).
  int layer = -1, micro_batch = -1;
  std::set<int> layers;
  std::array<std::int64_t, 5> count{};
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    if (op.layer >= 0) layers.insert(op.layer);
    if (layer < 0 && op.layer >= 0 && op.stream != Stream::dp_comm) layer = op.layer, micro_batch = op.micro_batch;
    const HostPart part = host_part(op);
    const bool in_first_layer = op.layer == layer && op.micro_batch == micro_batch;
    if (part == HostPart::optimizer || part == HostPart::fixed || in_first_layer) ++count[static_cast<int>(part)];
  }
  const PytorchHostCost& cost = pytorch_host_cost(shapes.tp, shapes.recompute,
                                                          shapes.kernels == PytorchKernels::compiled);
  const auto layer_count = static_cast<TimeNs>(layers.size());
  const std::array<TimeNs, 4> part_ns = {cost.forward_ns, cost.backward_ns, cost.optimizer_ns * layer_count,
                                         cost.fixed_ns};
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const HostPart part = host_part(rc.op(i));
    const auto p = static_cast<int>(part);
    if (part == HostPart::none || count[p] == 0) continue;
    rc.graph[i].dispatch_ns = part_ns[p] / count[p];
  }
}

}  // namespace twin::lowering
