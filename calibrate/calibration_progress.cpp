// stderr, like spdlog's lines: the progress never mixes into what a command prints on stdout.
#include "calibrate/calibration_progress.hpp"

#include <algorithm>
#include <cstdio>
#include <unistd.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

namespace twin {

std::string progress_text(const std::string& what, double done_weight, double total_weight, long long done_items,
                          long long total_items, const std::string& items, double elapsed_s) {
  const double fraction = total_weight > 0 ? std::min(1.0, done_weight / total_weight) : 1.0;
  std::string text = fmt::format("{} {:.0f}% ({} of {} {}), {:.0f} s", what, 100 * fraction, done_items,
                                 total_items, items, elapsed_s);
  if (fraction > 0 && fraction < 1) text += fmt::format(", about {:.0f} s left", elapsed_s * (1 - fraction) / fraction);
  return text;
}

CalibrationProgress::CalibrationProgress(std::string what, std::string items, double total_weight,
                                         long long total_items, bool quiet)
    : what_(std::move(what)), items_(std::move(items)), total_weight_(total_weight), total_items_(total_items),
      quiet_(quiet), terminal_(isatty(fileno(stderr)) != 0), started_(std::chrono::steady_clock::now()) {}

CalibrationProgress::~CalibrationProgress() {
  if (drawn_) std::fputc('\n', stderr);
}

void CalibrationProgress::advance(double weight, long long items) {
  done_weight_ += weight;
  done_items_ += items;
  if (quiet_) return;
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  const std::string text =
      progress_text(what_, done_weight_, total_weight_, done_items_, total_items_, items_, elapsed_s);
  if (terminal_) {
    std::fprintf(stderr, "\r[calibrate] %s\033[K", text.c_str());
    std::fflush(stderr);
    drawn_ = true;
    return;
  }
  const int tenth = total_weight_ > 0 ? static_cast<int>(10 * done_weight_ / total_weight_) : 10;
  if (tenth > last_tenth_) {
    last_tenth_ = tenth;
    spdlog::info("[calibrate] {}", text);
  }
}

}  // namespace twin
