// The progress line and the notices of a long search (see the header). The notices come from a thread of their
// own, so that a search that reports nothing for a while (a plan family, a long round) still shows life.
#include "cli/search_progress.hpp"

#include <cstdio>
#include <unistd.h>

#include <spdlog/spdlog.h>

namespace twin {

SearchProgress::SearchProgress(bool quiet)
    : quiet_(quiet), terminal_(isatty(fileno(stderr)) != 0), started_(std::chrono::steady_clock::now()) {
  notices_ = std::thread([this] { notice_while_running(); });
}

SearchProgress::~SearchProgress() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  stop_requested_.notify_one();
  notices_.join();
}

void SearchProgress::operator()(int done, int total) {
  done_ = done;
  total_ = total;
  if (quiet_ || total == 0) return;
  std::lock_guard lock(mutex_);  // the notice thread writes to stderr too
  if (terminal_) {
    if (line_ended_) return;
    std::fprintf(stderr, "\rsearching %d/%d strategies (simulated, or pruned by a lower bound) %.0f%%", done, total,
                 100.0 * done / total);
    line_ended_ = done == total;
    if (line_ended_) std::fputc('\n', stderr);
    return;
  }
  const int decile = done * 10 / total;
  if (decile > last_decile_) {
    last_decile_ = decile;
    spdlog::info("searched {}/{} strategies (simulated, or pruned by a lower bound)", done, total);
  }
}

// Every kNoticeAfter_s while the run goes on: a line saying how far it is. Under --quiet the first only; on a
// terminal not while the progress line is being drawn.
void SearchProgress::notice_while_running() {
  std::unique_lock lock(mutex_);
  for (int notices = 1;; ++notices) {
    const auto due = started_ + std::chrono::duration<double>(kNoticeAfter_s * notices);
    if (stop_requested_.wait_until(lock, std::chrono::time_point_cast<std::chrono::steady_clock::duration>(due),
                                   [this] { return stopping_; }))
      return;
    const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const int done = done_, total = total_;
    const bool uniform_running = total > 0 && done < total;
    if (uniform_running && !quiet_) continue;  // the progress line says it
    const char* once = quiet_ ? " (--quiet prints this line once)" : "";
    if (uniform_running && done > 0)
      std::fprintf(stderr, "twin simulate: %d of %d strategies searched in %.0f s; about %.0f s more at this pace, "
                           "then the plan families%s\n", done, total, elapsed_s, elapsed_s * (total - done) / done, once);
    else if (uniform_running)
      std::fprintf(stderr, "twin simulate: still simulating the first of %d strategies after %.0f s%s\n", total,
                   elapsed_s, once);
    else if (total >= 0)
      std::fprintf(stderr, "twin simulate: still working after %.0f s: the uniform strategies are searched; now the "
                           "plan families' searches (each bounded: docs/SIMULATOR.md \"Limits\") or the top plans' traces%s\n",
                   elapsed_s, once);
    else
      std::fprintf(stderr, "twin simulate: still working after %.0f s: enumerating and bounding the candidates, or a "
                           "plan family's search%s\n", elapsed_s, once);
    if (quiet_) return;
  }
}

}  // namespace twin
