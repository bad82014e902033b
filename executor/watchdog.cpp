// The watchdog thread and the fault-injection hook of twin execute.
#include "executor/watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>

#include <fmt/format.h>
#include <spdlog/spdlog.h>


namespace twin::exec {

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

void Watchdog::arm(std::string label, std::function<std::string()> detail) {
  std::lock_guard lock(mutex_);
  label_ = std::move(label);
  detail_ = std::move(detail);
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
      failure = fmt::format("{}: NCCL reported an error: {}", describe_failure(), error);
    else if (std::chrono::steady_clock::now() > deadline_)
      failure = fmt::format("{} did not finish within {:.0f} s (hang: a kernel that does not end, or a NCCL peer "
                            "that is stuck or gone)", describe_failure(), timeout_s_);
    if (failure.empty()) continue;
    // Straight to stderr, as twin's logger prints errors: the process ends before any logger flushes.
    spdlog::default_logger()->flush();
    std::fprintf(stderr, "[error] %s\n", failure.c_str());
    std::fflush(nullptr);
    hooks_.abort();
    std::_Exit(1);
  }
}

// The detail runs on a thread of its own, detached if it does not answer in time: a thread blocked
// inside the CUDA driver cannot be joined, and the process is about to end anyway.
std::string Watchdog::describe_failure() {
  auto answer = std::make_shared<std::promise<std::string>>();
  std::future<std::string> detail = answer->get_future();
  std::thread([answer, describe = detail_] {
    try {
      answer->set_value(describe());
    } catch (const std::exception& error) {
      answer->set_value(fmt::format("(the stuck op could not be named: {})", error.what()));
    }
  }).detach();
  if (detail.wait_for(std::chrono::duration<double>(kDetailWaitSeconds)) == std::future_status::ready)
    return fmt::format("{}: {}", label_, detail.get());
  return fmt::format("{}: an op (which one is unknown: CUDA did not answer the query within {:.0f} s)", label_,
                     kDetailWaitSeconds);
}

InjectedFault injected_fault_from_environment() {
  const char* text = std::getenv("TWIN_FAULT_INJECT");
  InjectedFault fault;
  if (!text || !*text) return fault;
  char kind[16] = {};
  if (std::sscanf(text, "%15[^:]:%d:%d", kind, &fault.rank, &fault.iteration) != 3)
    throw std::invalid_argument(fmt::format("TWIN_FAULT_INJECT=\"{}\": expected hang:RANK:ITERATION, "
                                            "stall:RANK:ITERATION or oom:RANK:ITERATION", text));
  if (std::strcmp(kind, "hang") == 0)
    fault.kind = InjectedFault::hang;
  else if (std::strcmp(kind, "stall") == 0)
    fault.kind = InjectedFault::stall;
  else if (std::strcmp(kind, "oom") == 0)
    fault.kind = InjectedFault::out_of_memory;
  else
    throw std::invalid_argument(fmt::format("TWIN_FAULT_INJECT=\"{}\": unknown fault \"{}\"", text, kind));
  return fault;
}

}  // namespace twin::exec
