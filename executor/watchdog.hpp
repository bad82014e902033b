// A watchdog thread per rank, as PyTorch's NCCL watchdog: NCCL reports errors asynchronously, and a dead
// or diverged peer makes collectives wait forever (the host can even block inside an NCCL call when its
// work queue is full). While armed, the thread checks the communicators' async errors and the deadline;
// on either it prints the rank and the op that did not finish, aborts every communicator and ends the
// process with exit code 1, so that the launcher stops the other ranks and nothing is left running.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace twin::exec {

// What the watchdog watches and what it stops: NCCL's communicators in twin execute (executor/gpu/
// execute.cpp), fakes in tests.
struct WatchdogHooks {
  std::function<std::string()> async_error;  // the first asynchronous error, empty when none
  std::function<void()> abort;               // aborts every communicator, so that no NCCL work stays blocked
};

class Watchdog {
 public:
  Watchdog(double timeout_s, WatchdogHooks hooks);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // The caller is about to wait for GPU work. On failure the message is "<label>: <detail()>": `label`
  // names the rank (and iteration), `detail` (called on the watchdog thread, on failure only) the op it
  // is stuck on. detail() may query CUDA, which can block behind a host thread stuck inside the driver:
  // it gets kDetailWaitSeconds, then the message goes out without it. The deadline is timeout_s from now.
  void arm(std::string label, std::function<std::string()> detail);
  void disarm();

 private:
  static constexpr double kDetailWaitSeconds = 2.0;
  void watch();
  std::string describe_failure();
  double timeout_s_;
  WatchdogHooks hooks_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string label_;
  std::function<std::string()> detail_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false, stopping_ = false;
  std::thread thread_;
};

// Test hook: TWIN_FAULT_INJECT="hang:RANK:ITERATION" makes that rank stop issuing work at its first
// collective of that iteration and sleep (a stuck peer); "stall:RANK:ITERATION" launches, before its first
// op of that iteration, a kernel that does not finish (a stuck kernel: the host then blocks in a CUDA wait,
// one GPU is enough); "oom:RANK:ITERATION" makes its first activation allocation of that iteration ask for
// more than the GPU holds (a real out-of-memory). Unset: no fault.
struct InjectedFault {
  enum Kind { none, hang, stall, out_of_memory } kind = none;
  int rank = -1, iteration = -1;
  bool hits(int rank_, int iteration_) const { return kind != none && rank == rank_ && iteration == iteration_; }
};
InjectedFault injected_fault_from_environment();

}  // namespace twin::exec
