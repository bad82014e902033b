// nvidia-smi writes the samples itself (-f), to a ".part" file renamed when the sampler stops, so that a reader
// never takes a file still being written for a whole one. The child asks to be ended with its parent
// (PR_SET_PDEATHSIG): a rank that dies without unwinding leaves no sampler running.
#include "executor/gpu/clock_sampler.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "traces/gpu_clocks.hpp"

namespace twin::exec {

ClockSampler::ClockSampler(const std::filesystem::path& run_dir)
    : partial_(run_dir / "gpu_clocks.csv.part"), final_(run_dir / "gpu_clocks.csv") {
  std::vector<std::string> args = {"nvidia-smi", kGpuClocksQuery, kGpuClocksFormat, "-lms", kGpuClocksIntervalMs,
                                   "-f", partial_.string()};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = fork();
  if (pid_ == 0) {  // the child: only async-signal-safe calls until exec
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    execvp("nvidia-smi", argv.data());
    _exit(127);
  }
  if (pid_ < 0) spdlog::warn("[execute] nvidia-smi could not be started: no gpu_clocks.csv for this run");
}

ClockSampler::~ClockSampler() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  int status = 0;
  waitpid(pid_, &status, 0);
  std::error_code error;
  if (std::filesystem::exists(partial_, error)) std::filesystem::rename(partial_, final_, error);
  if (error) spdlog::warn("[execute] {} could not be put in place: {}", final_.string(), error.message());
}

}  // namespace twin::exec
