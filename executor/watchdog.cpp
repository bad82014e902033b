#include "executor/watchdog.hpp"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "calibrate/gpu/checks.hpp"

namespace twin::exec {

void wait_watching_nccl(cudaEvent_t event, Communicators& comms, double timeout_s,
                        const std::function<std::string()>& where) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (int polls = 0;; ++polls) {
    const cudaError_t status = cudaEventQuery(event);
    if (status == cudaSuccess) return;
    if (status != cudaErrorNotReady) TWIN_CUDA_CHECK(status);
    if (const std::string error = comms.async_error(); !error.empty()) {
      comms.abort_all();
      throw std::runtime_error(fmt::format("{}: NCCL reported an error: {}", where(), error));
    }
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string place = where();  // before the abort: it reads which op's event completed
      comms.abort_all();
      throw std::runtime_error(fmt::format("{} did not finish within {:.0f} s: a NCCL peer is stuck or gone "
                                           "(hang)", place, timeout_s));
    }
    // Spin briefly (most waits end within a millisecond), then poll gently.
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
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
