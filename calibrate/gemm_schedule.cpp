// The split is the classic longest-processing-time-first greedy: within 4/3 of the best split, and its order
// depends on the costs and indices only, never on timing.
#include "calibrate/gemm_schedule.hpp"

#include <algorithm>
#include <numeric>

namespace twin {
namespace {

constexpr std::size_t kAlignBytes = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

}  // namespace

const std::vector<GemmShape>& gemm_agreement_shapes() {
  static const std::vector<GemmShape> shapes = {
      {1024, 1024, 1024, 1, false, false}, {2048, 2048, 2048, 1, false, false}, {4096, 4096, 4096, 1, false, false},
      {8192, 8192, 8192, 1, false, false}, {4096, 12288, 4096, 1, false, false}, {8192, 1536, 4096, 1, false, false}};
  return shapes;
}

std::vector<std::vector<std::size_t>> split_by_cost(const std::vector<double>& cost, int parts) {
  std::vector<std::vector<std::size_t>> out(static_cast<std::size_t>(std::max(parts, 1)));
  std::vector<std::size_t> order(cost.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
  std::vector<double> load(out.size(), 0.0);
  for (std::size_t i : order) {
    const auto part = static_cast<std::size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[part] += cost[i];
    out[part].push_back(i);
  }
  for (auto& part : out) std::sort(part.begin(), part.end());
  return out;
}

std::vector<std::vector<std::size_t>> gemm_rank_shares(const std::vector<GemmShape>& shapes,
                                                       const std::vector<double>& cost, int world_size) {
  const auto same = [](const GemmShape& a, const GemmShape& b) {
    return a.m == b.m && a.n == b.n && a.k == b.k && a.count == b.count && a.transpose_a == b.transpose_a &&
           a.transpose_b == b.transpose_b;
  };
  std::vector<std::size_t> shared, rest;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const auto& agreement = gemm_agreement_shapes();
    const bool everywhere = world_size > 1 && std::any_of(agreement.begin(), agreement.end(),
                                                          [&](const GemmShape& a) { return same(a, shapes[i]); });
    (everywhere ? shared : rest).push_back(i);
  }
  std::vector<double> rest_cost;
  for (std::size_t i : rest) rest_cost.push_back(cost[i]);
  std::vector<std::vector<std::size_t>> shares = split_by_cost(rest_cost, world_size);
  for (auto& share : shares) {
    for (std::size_t& i : share) i = rest[i];
    share.insert(share.end(), shared.begin(), shared.end());
    std::sort(share.begin(), share.end());
  }
  return shares;
}

std::vector<std::size_t> batch_starts(const std::vector<std::size_t>& order, const std::vector<double>& cost_ns,
                                      double target_ns, std::size_t max_shapes) {
  std::vector<std::size_t> starts;
  double batch_ns = 0;
  std::size_t batch_shapes = 0;
  for (std::size_t visit = 0; visit < order.size(); ++visit) {
    if (batch_shapes == 0 || batch_ns >= target_ns || batch_shapes >= max_shapes) {
      starts.push_back(visit);
      batch_ns = 0;
      batch_shapes = 0;
    }
    batch_ns += cost_ns[order[visit]];
    ++batch_shapes;
  }
  starts.push_back(order.size());
  return starts;
}

std::optional<GemmOperandLayout> gemm_operand_layout(const GemmShape& s, std::size_t l2_bytes, std::size_t max_bytes) {
  const auto count = static_cast<std::size_t>(s.count);
  const std::size_t a_bytes = aligned(2 * static_cast<std::size_t>(s.m * s.k) * count);
  const std::size_t b_bytes = aligned(2 * static_cast<std::size_t>(s.k * s.n) * count);
  const std::size_t c_bytes = aligned(2 * static_cast<std::size_t>(s.m * s.n) * count);
  const std::size_t set_bytes = a_bytes + b_bytes;
  if (set_bytes + c_bytes > max_bytes) return std::nullopt;
  const std::size_t wanted = std::clamp<std::size_t>(2 * l2_bytes / set_bytes + 1, 1, kGemmMaxInputSets);
  GemmOperandLayout layout;
  layout.sets = std::max<std::size_t>(1, std::min(wanted, (max_bytes - c_bytes) / set_bytes));
  for (std::size_t i = 0; i < layout.sets; ++i) {
    layout.a_offsets.push_back(i * set_bytes);
    layout.b_offsets.push_back(i * set_bytes + a_bytes);
  }
  layout.c_offset = layout.sets * set_bytes;
  layout.bytes = layout.c_offset + c_bytes;
  return layout;
}

}  // namespace twin
