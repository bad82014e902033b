// The event queue's cold path (its hot one is inline, event_queue.hpp).
#include "sim/event_queue.hpp"

#include <algorithm>

namespace twin::sim {

// Pending entries in order (a sorted array is a heap) take the sequence numbers 0, 1, ...: the same order.
void EventQueue::renumber() {
  std::sort(heap_.begin(), heap_.end());
  for (std::size_t i = 0; i < heap_.size(); ++i) place(i, heap_[i] >> 71 << 71 | static_cast<Key>(i) << 32 |
                                                              activity_of(heap_[i]));
  next_seq_ = heap_.size();
}

}  // namespace twin::sim
