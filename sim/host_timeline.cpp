#include "sim/host_timeline.hpp"

#include <algorithm>

#include "sim/horizon.hpp"

namespace twin::sim {

HostTimeline::HostTimeline(const FlatIteration& flat) : flat_(flat), host_free_ns_(flat.classes.size(), 0) {}

bool HostTimeline::defer(int c, std::uint32_t op) {
  if (flat_.classes[c].host_work.empty()) return false;
  ready_.push_back({c, op, 0});
  return true;
}

const std::vector<Admission>& HostTimeline::admit(TimeNs now_ns) {
  admitted_.clear();
  admitted_.swap(ready_);  // ready_ keeps the old buffer's capacity for the next event
  const auto has_host_work = [&](const Admission& a) { return flat_.classes[a.rank_class].ops[a.op].host_work; };
  std::stable_partition(admitted_.begin(), admitted_.end(), has_host_work);
  for (Admission& a : admitted_) {
    TimeNs& host_free_ns = host_free_ns_[a.rank_class];
    if (has_host_work(a))
      host_free_ns = later(std::max(now_ns, host_free_ns), flat_.classes[a.rank_class].host_ns(a.op));
    a.start_ns = std::max(now_ns, host_free_ns);
  }
  return admitted_;
}

}  // namespace twin::sim
