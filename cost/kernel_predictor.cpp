// Why 4 neighbours and not the GEMMs' 8: a kind has a few to a few dozen measured shapes on one or two
// axes (rows x cols, elements, bytes), so its 4 nearest already surround a query inside the grid; more
// would reach across octaves where the kernel's efficiency changes. Ties in distance keep the earlier key.
#include "cost/kernel_predictor.hpp"

#include <algorithm>
#include <cmath>

#include "cost/shape_space.hpp"

namespace twin {

std::vector<MeasuredKernelShape> index_measured_kernels(const std::map<std::string, Measurement>& measured) {
  std::vector<MeasuredKernelShape> out;
  for (const auto& [key, m] : measured) {
    const double time_ns = benchmark_time_ns(m);
    if (time_ns <= 0) continue;
    auto op = op_from_kernel_key(key);
    if (op && op->kind != OpKind::gemm && op->kind != OpKind::moe_router) out.push_back({*op, time_ns});
  }
  return out;
}

double predict_kernel_time_ns(const std::vector<MeasuredKernelShape>& measured, const Op& op,
                              const std::function<double(const Op&)>& model_ns) {
  std::vector<std::pair<double, std::size_t>> by_distance;  // (squared octaves, index): ties keep key order
  for (std::size_t i = 0; i < measured.size(); ++i)
    if (auto squared = squared_octave_distance(measured[i].op, op)) by_distance.emplace_back(*squared, i);
  const auto ratio = interpolate_log_ratio(std::move(by_distance), kKernelNeighbours, 0, [&](std::size_t i) {
    const double model = model_ns(measured[i].op);
    return model > 0 ? std::log(measured[i].time_ns / model) : 0.0;
  });
  // None of a capped loss, capped attention or attention with sinks measured: the plain kernel's, the pass unpriced.
  if (!ratio)
    if (const std::optional<Op> plain = without_added_pass(op)) return predict_kernel_time_ns(measured, *plain, model_ns);
  // No fp32-gradient optimizer step measured: the 16-bit one's price, scaled by the bytes each moves.
  if (!ratio)
    if (const std::optional<Op> narrower = with_16_bit_gradient(op))
      if (const double narrower_model_ns = model_ns(*narrower); narrower_model_ns > 0)
        return predict_kernel_time_ns(measured, *narrower, model_ns) * model_ns(op) / narrower_model_ns;
  if (!ratio) return model_ns(op);
  if (ratio->exact) return measured[*ratio->exact].time_ns;
  return model_ns(op) * std::exp(ratio->log_ratio);
}

}  // namespace twin
