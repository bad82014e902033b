// Every op records its event: the watchdog names the first one that did not complete when an iteration hangs.
#include "executor/gpu/issue_events.hpp"

#include "executor/event_waits.hpp"
#include "gpu/checks.hpp"

namespace twin::exec {

IssueEvents::IssueEvents(const RankClass& rank_class)
    : op_done_(rank_class.size(), nullptr), waits_(event_waits(rank_class)), stream_done_(kStreamCount, nullptr) {
  for (cudaEvent_t& done : op_done_) TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  for (cudaEvent_t& done : stream_done_) TWIN_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  TWIN_CUDA_CHECK(cudaEventCreate(&start_));
  TWIN_CUDA_CHECK(cudaEventCreate(&end_));
}

IssueEvents::~IssueEvents() {
  for (cudaEvent_t event : op_done_) cudaEventDestroy(event);
  for (cudaEvent_t event : stream_done_) cudaEventDestroy(event);
  cudaEventDestroy(start_);
  cudaEventDestroy(end_);
}

}  // namespace twin::exec
