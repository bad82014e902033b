// The ring's steps by collective; the bus factor follows from them, since each ring step moves S/n.
#include "cost/collective_steps.hpp"

#include <optional>
#include <stdexcept>
#include <string>

namespace twin {
namespace {

bool is_point_to_point(OpKind kind) { return kind == OpKind::send || kind == OpKind::recv; }

// Ring steps of S/n each; nullopt for anything but the four collectives.
std::optional<int> ring_steps(OpKind collective, int ranks) {
  switch (collective) {
    case OpKind::all_reduce: return 2 * (ranks - 1);
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all: return ranks - 1;
    case OpKind::send:
    case OpKind::recv:
    case OpKind::gemm:
    case OpKind::attention_forward:
    case OpKind::attention_backward:
    case OpKind::norm_forward:
    case OpKind::norm_backward:
    case OpKind::rope_forward:
    case OpKind::rope_backward:
    case OpKind::activation_forward:
    case OpKind::activation_backward:
    case OpKind::elementwise:
    case OpKind::embedding_forward:
    case OpKind::embedding_backward:
    case OpKind::loss_forward:
    case OpKind::loss_backward:
    case OpKind::moe_router:
    case OpKind::moe_permute:
    case OpKind::moe_unpermute:
    case OpKind::optimizer_step:
    case OpKind::fp8_cast:
    case OpKind::fp8_transpose: return std::nullopt;
  }
}

}  // namespace

int algorithm_steps(OpKind collective, int ranks) {
  if (is_point_to_point(collective)) return 1;
  if (const std::optional<int> steps = ring_steps(collective, ranks)) return *steps;
  throw std::invalid_argument("algorithm_steps: not a collective: " + to_string(collective));
}

double busbw_factor(OpKind collective, int ranks) {
  if (is_point_to_point(collective)) return 1.0;
  // steps / n: the same double as nccl-tests' 2.0 * (n - 1) / n, both operands of the one rounding division exact.
  if (const std::optional<int> steps = ring_steps(collective, ranks)) return *steps / static_cast<double>(ranks);
  throw std::invalid_argument("busbw_factor: not a collective: " + to_string(collective));
}

}  // namespace twin
