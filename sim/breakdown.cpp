// The category of an interval is decided by what was active during it, i.e. before the change at now.
#include "sim/breakdown.hpp"

namespace twin::sim {

void ClassClock::advance(TimeNs now_ns) {
  const TimeNs elapsed = now_ns - last_ns_;
  if (elapsed <= 0) return;
  last_ns_ = now_ns;
  if (communication_active_ > 0) communication_busy_ns_ += elapsed;
  if (optimizer_active_ > 0) breakdown_.optimizer_ns += elapsed;
  else if (compute_active_ > 0) breakdown_.compute_ns += elapsed;
  else if (communication_active_ > 0) breakdown_.exposed_communication_ns += elapsed;
  else breakdown_.bubble_ns += elapsed;
}

}  // namespace twin::sim
