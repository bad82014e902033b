// Binary heap by hand rather than std::priority_queue: an activity's entry is found through its position and
// moved in place when it is rescheduled, and each entry is one 128-bit key, compared in one instruction pair
// where the pair (time, seq) was a branch that the sift loops mispredicted often.
#include "sim/event_queue.hpp"

#include <algorithm>

namespace twin::sim {

EventQueue::Key EventQueue::key(std::uint32_t activity, TimeNs time_ns) {
  return static_cast<Key>(static_cast<std::uint64_t>(time_ns)) << 71 | static_cast<Key>(next_seq_++) << 32 | activity;
}

void EventQueue::schedule(std::uint32_t activity, TimeNs time_ns) {
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

Event EventQueue::pop() {
  const Key top = heap_.front();
  position_[activity_of(top)] = kAbsent;
  const Key last = heap_.back();
  heap_.pop_back();
  if (!heap_.empty()) sift_down(0, last);
  return {static_cast<TimeNs>(static_cast<std::uint64_t>(top >> 71)), activity_of(top)};
}

void EventQueue::sift_up(std::size_t hole, Key key) {
  while (hole > 0) {
    const std::size_t parent = (hole - 1) / 2;
    if (!(key < heap_[parent])) break;
    place(hole, heap_[parent]);
    hole = parent;
  }
  place(hole, key);
}

void EventQueue::sift_down(std::size_t hole, Key key) {
  const std::size_t size = heap_.size();
  for (std::size_t child = 2 * hole + 1; child < size; child = 2 * hole + 1) {
    if (child + 1 < size && heap_[child + 1] < heap_[child]) ++child;
    if (!(heap_[child] < key)) break;
    place(hole, heap_[child]);
    hole = child;
  }
  place(hole, key);
}

// Pending entries in order (a sorted array is a heap) take the sequence numbers 0, 1, ...: the same order.
void EventQueue::renumber() {
  std::sort(heap_.begin(), heap_.end());
  for (std::size_t i = 0; i < heap_.size(); ++i) place(i, heap_[i] >> 71 << 71 | static_cast<Key>(i) << 32 |
                                                              activity_of(heap_[i]));
  next_seq_ = heap_.size();
}

}  // namespace twin::sim
