// The events of the interpreter's issue loop: one per op, recorded after it (the event waits of the graph's
// cross-stream edges, executor/event_waits.hpp, and where an iteration hangs), one per stream to join the streams at
// the iteration's end, and the iteration's start and end on the compute stream (timed).
#pragma once
#include <vector>

#include <cuda_runtime.h>

#include "core/op_graph.hpp"

namespace twin::exec {

class IssueEvents {
 public:
  explicit IssueEvents(const RankClass& rank_class);
  ~IssueEvents();
  IssueEvents(const IssueEvents&) = delete;
  IssueEvents& operator=(const IssueEvents&) = delete;

  cudaEvent_t op_done(OpIndex op) const { return op_done_[static_cast<std::size_t>(op)]; }
  // The ops of other streams `op` waits for.
  const std::vector<OpIndex>& waits(OpIndex op) const { return waits_[static_cast<std::size_t>(op)]; }
  cudaEvent_t stream_done(int stream) const { return stream_done_[static_cast<std::size_t>(stream)]; }
  cudaEvent_t start() const { return start_; }
  cudaEvent_t end() const { return end_; }

 private:
  std::vector<cudaEvent_t> op_done_;
  std::vector<std::vector<OpIndex>> waits_;
  std::vector<cudaEvent_t> stream_done_;
  cudaEvent_t start_ = nullptr, end_ = nullptr;
};

}  // namespace twin::exec
