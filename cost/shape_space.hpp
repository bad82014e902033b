// Where a compute op's shape lies among the shapes a profile measured: the numbers of its shape key in
// octaves, and which kernel variant it is. Interpolation among measured shapes (kernel_predictor.hpp)
// and among traced ones (in_situ.hpp) both measure distances here.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "core/op.hpp"

namespace twin {

// The op a compute key of kernel_shape_key names ("norm_forward:rows=4096,cols=4096",
// "gemm:m=..,n=..,k=..,count=..,ta=..,tb=..", ...), with the fields the key carries set; nullopt for
// communication and malformed keys (only a key kernel_shape_key itself would write is accepted).
std::optional<Op> op_from_kernel_key(std::string_view key);

// The key's sizes in octaves: GEMMs (m, n, k, count); attention (b x h, sq, skv, d + d_v); the optimizer
// step (elements); elementwise and MoE permutations (bytes); the rest (rows, cols).
std::vector<double> shape_octaves(const Op& op);

// The squared distance in octaves between two shapes of the same kind and kernel variant (GEMM layout,
// gated activation, causal and flash attention); nullopt when they are not comparable.
std::optional<double> squared_octave_distance(const Op& a, const Op& b);

// The kernel a variant adds a pass to, where a profile measured none of the variant: the op without the first of its
// soft-capped logits, soft-capped attention scores and attention sinks (a tanh per element, the sinks' rescale), to
// be priced as that kernel with the pass unpriced; nullopt when the op has none of them.
std::optional<Op> without_added_pass(const Op& op);

// The same kernel on a 16-bit main gradient, for an optimizer step that reads an fp32 one (its own variant: a profile
// may have measured only 16-bit steps, every calibration before 2026-12-03); nullopt for any other op.
std::optional<Op> with_16_bit_gradient(const Op& op);

// Inverse-distance weighting in log space, which the predictors share. `by_distance` holds (squared
// distance, index) of the candidates in key order; of the `neighbours` nearest (ties: the earlier index),
// the result is sum_i w_i log_ratio(i) / (prior_weight + sum_i w_i) with w_i = 1 / d_i^2: prior_weight acts
// as one more neighbour whose log ratio is 0. `exact` is set when the nearest is at distance 0 (then
// log_ratio is that one's alone). Empty candidates: nullopt.
struct InterpolatedLogRatio {
  double log_ratio = 0;
  std::optional<std::size_t> exact;
};
std::optional<InterpolatedLogRatio> interpolate_log_ratio(std::vector<std::pair<double, std::size_t>> by_distance,
                                                          std::size_t neighbours, double prior_weight,
                                                          const std::function<double(std::size_t)>& log_ratio);

}  // namespace twin
