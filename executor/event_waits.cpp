#include "executor/event_waits.hpp"

namespace twin::exec {

std::vector<std::vector<OpIndex>> event_waits(const RankClass& rc) {
  std::vector<std::vector<OpIndex>> waits(rc.size());
  OpIndex last_compute = kNoOpIndex;
  for (OpIndex i = 0; i < rc.size(); ++i) {
    const Op& op = rc.op(i);
    for (auto [edge, end] = boost::in_edges(i, rc.graph); edge != end; ++edge) {
      const auto from = static_cast<OpIndex>(boost::source(*edge, rc.graph));
      if (rc.op(from).stream != op.stream) waits[i].push_back(from);
    }
    if (op.kind == OpKind::recv && op.group == GroupKind::pipeline && last_compute != kNoOpIndex)
      waits[i].push_back(last_compute);
    if (op.stream == Stream::compute) last_compute = i;
  }
  return waits;
}

}  // namespace twin::exec
