// Expert parallelism's token exchange, planned from the routing: which rows of which buffer go to which EP rank.
// Each EP rank holds `experts / ep` consecutive experts (strategies/rank_layout.hpp's first_expert_of). A rank
// sorts its tokens' routed copies by global expert (so by the rank holding the expert) and sends each local
// expert's rows of each peer as one chunk; the holder receives them grouped by its local expert, sources in rank
// order within one expert, which is the order its grouped GEMMs read. Combine sends the same chunks back. Pure
// CPU: executor/gpu/moe_block.hpp issues it as grouped NCCL sends and receives.
#pragma once
#include <cstdint>
#include <vector>

namespace twin::exec {

struct ExchangeChunk {
  int peer = 0;            // the EP rank (position in the expert group) at the other end
  int local_expert = 0;    // which of the holder's experts the rows are for
  std::int64_t row = 0;    // first row in this rank's buffer
  std::int64_t rows = 0;
};

struct ExpertExchange {
  // The dispatch's sends: chunks of this rank's copies sorted by global expert (rows at `row` there), per
  // (peer, local expert) in that order. Combine receives the experts' outputs back into the same rows.
  std::vector<ExchangeChunk> from_tokens;
  // The dispatch's receives: chunks of the rows this rank's experts compute (local expert, then source),
  // combine's sends.
  std::vector<ExchangeChunk> at_experts;
  std::vector<std::int64_t> local_expert_rows;  // per local expert: the grouped GEMMs' row counts
  std::int64_t rows_routed = 0;                 // this rank's routed copies (tokens x top-k)
  std::int64_t rows_held = 0;                   // rows its experts compute
};

// `routed` holds, for each EP rank r of the group and each global expert e, the copies r routes to e
// (routed[r * experts + e]); `me` is this rank's position. Chunks of no rows are left out (both ends agree).
// Throws std::invalid_argument when the sizes do not fit (experts not divisible by ep, a negative count).
ExpertExchange plan_expert_exchange(const std::vector<std::int64_t>& routed, int ep, int experts, int me);

}  // namespace twin::exec
