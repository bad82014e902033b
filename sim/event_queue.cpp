// Binary heap by hand rather than std::priority_queue: pop() moves the top out without a copy of the
// comparator dance, and the sift loops stay branch-light on the (time, seq) key, compared as one number.
#include "sim/event_queue.hpp"

#include <utility>

namespace twin::sim {
namespace {

// (time, seq) as one 128-bit number ordered as the pair is: one compare where the pair's two were a branch that
// the sift loops mispredicted often (the time's sign bit flipped, so that unsigned order is the signed order).
unsigned __int128 key(const Event& e) {
  const std::uint64_t time = static_cast<std::uint64_t>(e.time_ns) ^ (std::uint64_t{1} << 63);
  return static_cast<unsigned __int128>(time) << 64 | e.seq;
}

bool earlier(const Event& a, const Event& b) { return key(a) < key(b); }

}  // namespace

void EventQueue::push(TimeNs time_ns, std::uint32_t activity, std::uint32_t version) {
  Event event{time_ns, next_seq_++, activity, version};
  std::size_t hole = heap_.size();
  heap_.push_back(event);
  while (hole > 0) {
    std::size_t parent = (hole - 1) / 2;
    if (!earlier(event, heap_[parent])) break;
    heap_[hole] = heap_[parent];
    hole = parent;
  }
  heap_[hole] = event;
}

Event EventQueue::pop() {
  Event top = heap_.front();
  Event last = heap_.back();
  heap_.pop_back();
  const std::size_t size = heap_.size();
  if (size == 0) return top;
  std::size_t hole = 0;
  for (;;) {
    std::size_t child = 2 * hole + 1;
    if (child >= size) break;
    if (child + 1 < size && earlier(heap_[child + 1], heap_[child])) ++child;
    if (!earlier(heap_[child], last)) break;
    heap_[hole] = heap_[child];
    hole = child;
  }
  heap_[hole] = last;
  return top;
}

}  // namespace twin::sim
