// Where a rank class's time goes, swept as the simulation runs: at every change of what is active the
// elapsed interval is charged to one category, by priority optimizer > compute > exposed communication
// > bubble, so that the four add up to the class's finish time exactly. Defined here, inline: the engine calls it
// at every event.
#pragma once
#include "core/units.hpp"
#include "sim/result.hpp"

namespace twin::sim {

class ClassClock {
 public:
  // Call before every change of activity at `now_ns` (non-decreasing).
  void advance(TimeNs now_ns);

  void begin_compute(bool optimizer) { ++compute_active_; optimizer_active_ += optimizer; }
  void end_compute(bool optimizer) { --compute_active_; optimizer_active_ -= optimizer; }
  void begin_communication(bool optimizer) { ++communication_active_; optimizer_active_ += optimizer; }
  void end_communication(bool optimizer) { --communication_active_; optimizer_active_ -= optimizer; }

  int compute_active() const { return compute_active_; }
  int communication_active() const { return communication_active_; }
  const TimeBreakdown& breakdown() const { return breakdown_; }
  TimeNs communication_busy_ns() const { return communication_busy_ns_; }

 private:
  TimeNs last_ns_ = 0;
  int compute_active_ = 0;
  int communication_active_ = 0;
  int optimizer_active_ = 0;
  TimeBreakdown breakdown_;
  TimeNs communication_busy_ns_ = 0;
};

// The category of an interval is decided by what was active during it, i.e. before the change at now.
inline void ClassClock::advance(TimeNs now_ns) {
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
