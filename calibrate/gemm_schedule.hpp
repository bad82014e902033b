// How `twin calibrate` lays out the GEMM grid's work: which GPU measures which shapes, in which batches, and
// where each shape's operands lie in one device arena. Pure C++ so that the split is tested without a GPU.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/op.hpp"

namespace twin {

// Shapes every GPU measures besides its share, so that the GPUs' times can be compared (the rest is measured
// once): large and small squares and two model-like widths, all in the grid's untransposed layout.
const std::vector<GemmShape>& gemm_agreement_shapes();

// Splits shape indices 0..cost.size()-1 over `parts` GPUs so that their summed costs are even: the longest
// first, each to the least loaded part (ties: the lower index). Each part's indices ascend. Deterministic.
std::vector<std::vector<std::size_t>> split_by_cost(const std::vector<double>& cost, int parts);

// The shape indices each of `world_size` GPUs times: the shapes split by `cost` (split_by_cost), plus, with two
// GPUs or more, every shape of gemm_agreement_shapes() in `shapes` on every GPU. Each rank's indices ascend.
std::vector<std::vector<std::size_t>> gemm_rank_shares(const std::vector<GemmShape>& shapes,
                                                       const std::vector<double>& cost, int world_size);

// Cuts a visit order into consecutive batches of about `target_ns` of estimated kernel time (at least one
// shape, at most `max_shapes`): returns the start of each batch and, last, order.size().
std::vector<std::size_t> batch_starts(const std::vector<std::size_t>& order, const std::vector<double>& cost_ns,
                                      double target_ns, std::size_t max_shapes);

// Where one shape's operands lie in the arena, in bytes: `sets` copies of A and B (so that the L2 cache does
// not hold a small problem's operands between repetitions: sets until they span twice the L2, at most 8),
// then C. Offsets are aligned to 256 bytes.
struct GemmOperandLayout {
  std::size_t sets = 0;
  std::vector<std::size_t> a_offsets, b_offsets;
  std::size_t c_offset = 0;
  std::size_t bytes = 0;  // the arena this shape needs
};
inline constexpr std::size_t kGemmMaxInputSets = 8;
// nullopt when one set and C do not fit in `max_bytes`.
std::optional<GemmOperandLayout> gemm_operand_layout(const GemmShape& shape, std::size_t l2_bytes, std::size_t max_bytes);

}  // namespace twin
