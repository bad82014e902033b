// The future event set of the engine: at most one pending completion per activity, popped by (time,
// scheduling sequence), so that completions due at the same nanosecond pop in the order they were scheduled
// and every run is reproducible. Rescheduling an activity replaces its pending completion in place (an indexed
// binary heap) and gives it a new sequence number, exactly as if the old one had been dropped and a new one
// pushed: a re-rated activity leaves no stale event behind to pop and skip (a sixth of the events before).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/units.hpp"

namespace twin::sim {

struct Event {
  TimeNs time_ns = 0;
  std::uint32_t activity = 0;  // what completes
};

class EventQueue {
 public:
  // Sequence numbers take 39 bits of an entry (time 57, activity 32): after 2^39 schedulings (hours of
  // replay) the pending ones are renumbered in order. `seq_limit` lowers that bound for tests.
  static constexpr std::uint64_t kSeqLimit = std::uint64_t{1} << 39;
  explicit EventQueue(std::uint64_t seq_limit = kSeqLimit) : seq_limit_(seq_limit) {}

  void reserve(std::size_t events) { heap_.reserve(events); }
  // `activity` completes at `time_ns` (0 <= time_ns < 2^57), instead of when it was to complete if it was
  // scheduled: it pops after everything scheduled before for the same time.
  void schedule(std::uint32_t activity, TimeNs time_ns);
  // Removes and returns the earliest completion (the first scheduled among equal times). Precondition: !empty().
  Event pop();
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  bool scheduled(std::uint32_t activity) const {
    return activity < position_.size() && position_[activity] != kAbsent;
  }

 private:
  // time << 71 | seq << 32 | activity: ordered as (time, seq) is, one 128-bit compare.
  using Key = unsigned __int128;
  static constexpr std::uint32_t kAbsent = 0xffffffffu;
  static std::uint32_t activity_of(Key key) { return static_cast<std::uint32_t>(key); }
  Key key(std::uint32_t activity, TimeNs time_ns);
  void place(std::size_t index, Key key) {
    heap_[index] = key;
    position_[activity_of(key)] = static_cast<std::uint32_t>(index);
  }
  void sift_up(std::size_t hole, Key key);
  void sift_down(std::size_t hole, Key key);
  void renumber();

  std::vector<Key> heap_;
  std::vector<std::uint32_t> position_;  // per activity: its index in heap_, or kAbsent
  std::uint64_t next_seq_ = 0;
  std::uint64_t seq_limit_;
};

}  // namespace twin::sim
