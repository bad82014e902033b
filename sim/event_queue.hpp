// The future event set of the engine: at most one pending completion per activity, popped by (time,
// scheduling sequence), so that completions due at the same nanosecond pop in the order they were scheduled
// and every run is reproducible. Rescheduling an activity replaces its pending completion in place (an indexed
// binary heap) and gives it a new sequence number, exactly as if the old one had been dropped and a new one
// pushed: a re-rated activity leaves no stale event behind to pop and skip (a sixth of the events before).
#pragma once
#include <algorithm>
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
  explicit EventQueue(std::uint64_t seq_limit = kSeqLimit) : seq_limit_(std::min(seq_limit, kSeqLimit)) {}

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

// A binary heap by hand rather than std::priority_queue: an activity's entry is found through its position and
// moved in place when it is rescheduled, and each entry is one 128-bit key, compared in one instruction pair where
// the pair (time, seq) was a branch that the sift loops mispredicted often. Defined inline: the engine schedules
// and pops at every event, and calls into other files were a twentieth of its time (with the activity pool's, the
// link loads' and the clock's).
inline EventQueue::Key EventQueue::key(std::uint32_t activity, TimeNs time_ns) {
  return static_cast<Key>(static_cast<std::uint64_t>(time_ns)) << 71 | static_cast<Key>(next_seq_++) << 32 | activity;
}

inline void EventQueue::schedule(std::uint32_t activity, TimeNs time_ns) {
  if (activity >= position_.size()) position_.resize(activity + std::size_t{1}, kAbsent);
  if (next_seq_ == seq_limit_) renumber();
  const Key k = key(activity, time_ns);
  const std::uint32_t at = position_[activity];
  if (at == kAbsent) {
    heap_.push_back(k);
    sift_up(heap_.size() - 1, k);
  } else if (k < heap_[at]) {
    sift_up(at, k);
  } else {
    sift_down(at, k);
  }
}

inline Event EventQueue::pop() {
  const Key top = heap_.front();
  position_[activity_of(top)] = kAbsent;
  const Key last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last);
  return {static_cast<TimeNs>(static_cast<std::uint64_t>(top >> 71)), activity_of(top)};
}

inline void EventQueue::sift_up(std::size_t hole, Key key) {
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / 2;
    if (!(key < heap_[parent])) break;
    place(hole, heap_[parent]);
    hole = parent;
  }
  place(hole, key);
}

inline void EventQueue::sift_down(std::size_t hole, Key key) {
  const std::size_t size = heap_.size();
  for (std::size_t child = 2 * hole + 1; child < size; child = 2 * hole + 1) {
    if (child + 1 < size && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < key)) break;
    place(hole, heap_[child]);
    hole = child;
  }
  place(hole, key);
}

}  // namespace twin::sim
