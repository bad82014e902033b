// Offsets are prefix sums: a sender's copies of expert e start after its copies of experts < e; a holder's
// rows of local expert j start after all rows of its experts < j, and within j after the sources before.
#include "executor/expert_exchange.hpp"

#include <stdexcept>

#include <fmt/format.h>

#include "strategies/rank_layout.hpp"

namespace twin::exec {

ExpertExchange plan_expert_exchange(const std::vector<std::int64_t>& routed, int ep, int experts, int me) {
  if (ep < 1 || experts < 1 || experts % ep != 0 || me < 0 || me >= ep ||
      routed.size() != static_cast<std::size_t>(ep) * static_cast<std::size_t>(experts))
    throw std::invalid_argument(fmt::format("expert exchange: {} counts for {} ranks of {} experts (rank {})",
                                            routed.size(), ep, experts, me));
  for (std::int64_t count : routed)
    if (count < 0) throw std::invalid_argument("expert exchange: a negative row count");
  const int local = experts / ep;
  const auto count = [&](int rank, int expert) { return routed[static_cast<std::size_t>(rank) * experts + expert]; };
  ExpertExchange x;
  std::int64_t row = 0;
  for (int peer = 0; peer < ep; ++peer)
    for (int j = 0; j < local; ++j) {
      const std::int64_t rows = count(me, first_expert_of(peer, local) + j);
      if (rows > 0) x.from_tokens.push_back({peer, j, row, rows});
      row += rows;
    }
  x.rows_routed = row;
  x.local_expert_rows.assign(static_cast<std::size_t>(local), 0);
  row = 0;
  for (int j = 0; j < local; ++j)
    for (int source = 0; source < ep; ++source) {
      const std::int64_t rows = count(source, first_expert_of(me, local) + j);
      if (rows > 0) x.at_experts.push_back({source, j, row, rows});
      row += rows;
      x.local_expert_rows[static_cast<std::size_t>(j)] += rows;
    }
  x.rows_held = row;
  return x;
}

}  // namespace twin::exec
