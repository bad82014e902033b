// The watchdog thread and the fault-injection hook of twin execute.
#include "executor/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>


namespace twin::exec {

WatchdogHooks nccl_watchdog_hooks(Communicators& comms) {
  return {[&comms] { return comms.async_error(); }, [&comms] { comms.abort_all(); }};
}

Watchdog::Watchdog(double timeout_s, WatchdogHooks hooks)
    : timeout_s_(timeout_s), hooks_(std::move(hooks)), thread_([this] { watch(); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Watchdog::arm(std::function<std::string()> where) {
  std::lock_guard lock(mutex_);
  where_ = std::move(where);
  deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                      std::chrono::duration<double>(timeout_s_));
  armed_ = true;
}

void Watchdog::disarm() {
  std::lock_guard lock(mutex_);
  armed_ = false;
}

void Watchdog::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, std::chrono::milliseconds(100));
    if (stopping_ || !armed_) continue;
    std::string failure;
    if (const std::string error = hooks_.async_error(); !error.empty())
      failure = fmt::format("{}: NCCL reported an error: {}", where_(), error);
    else if (std::chrono::steady_clock::now() > deadline_)
      failure = fmt::format("{} did not finish within {:.0f} s: a NCCL peer is stuck or gone (hang)", where_(),
                            timeout_s_);
    if (failure.empty()) continue;
    // Straight to stderr, as twin's logger prints errors: the process ends before any logger flushes.
    spdlog::default_logger()->flush();
    std::fprintf(stderr, "[error] %s\n", failure.c_str());
    std::fflush(nullptr);
    hooks_.abort();
    std::_Exit(1);
  }
}

InjectedFault injected_fault_from_environment() {
  const char* text = std::getenv("TWIN_FAULT_INJECT");
  InjectedFault fault;
  if (!text || !*text) return fault;
  char kind[16] = {};
  if (std::sscanf(text, "%15[^:]:%d:%d", kind, &fault.rank, &fault.iteration) != 3)
    throw std::invalid_argument(fmt::format("TWIN_FAULT_INJECT=\"{}\": expected hang:RANK:ITERATION or "
                                            "oom:RANK:ITERATION", text));
  if (std::strcmp(kind, "hang") == 0)
    fault.kind = InjectedFault::hang;
  else if (std::strcmp(kind, "oom") == 0)
    fault.kind = InjectedFault::out_of_memory;
  else
    throw std::invalid_argument(fmt::format("TWIN_FAULT_INJECT=\"{}\": unknown fault \"{}\"", text, kind));
  return fault;
}

}  // namespace twin::exec
