// The future event set of the engine: a binary min-heap keyed by (time, insertion sequence), so that
// events due at the same nanosecond pop in the order they were scheduled and every run is reproducible.
// Events are never removed: an activity whose completion moves bumps its version, and the engine skips
// popped events whose version is stale (lazy invalidation).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/units.hpp"

namespace twin::sim {

struct Event {
  TimeNs time_ns = 0;
  std::uint64_t seq = 0;        // insertion order: the tie-break that makes equal times FIFO
  std::uint32_t activity = 0;   // what completes
  std::uint32_t version = 0;    // the activity's version when this was scheduled
};

class EventQueue {
 public:
  void reserve(std::size_t events) { heap_.reserve(events); }
  void push(TimeNs time_ns, std::uint32_t activity, std::uint32_t version);
  // Removes and returns the earliest event (lowest seq among equal times). Precondition: !empty().
  Event pop();
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  std::uint64_t pushed() const { return next_seq_; }

 private:
  std::vector<Event> heap_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace twin::sim
