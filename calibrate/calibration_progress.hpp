// The progress of a long calibration step: one line with how far it is and the time left, redrawn in place on
// a terminal, and a line at every tenth of the work in a log; nothing under --quiet. The time left extrapolates
// the pace so far over the estimated kernel time still to run (weights), not over counts: a grid's shapes differ
// in cost by five orders of magnitude.
#pragma once
#include <chrono>
#include <string>

namespace twin {

// "GEMMs 37% (4712 of 12729 timings), 21 s, about 36 s left"
std::string progress_text(const std::string& what, double done_weight, double total_weight, long long done_items,
                          long long total_items, const std::string& items, double elapsed_s);

class CalibrationProgress {
 public:
  CalibrationProgress(std::string what, std::string items, double total_weight, long long total_items, bool quiet);
  ~CalibrationProgress();  // ends the terminal's line
  CalibrationProgress(const CalibrationProgress&) = delete;
  CalibrationProgress& operator=(const CalibrationProgress&) = delete;

  void advance(double weight, long long items);
  // The pace is measured from here on (work that came before, such as heating the GPU, is no part of it).
  void restart_clock() { started_ = std::chrono::steady_clock::now(); }

 private:
  std::string what_, items_;
  double total_weight_, done_weight_ = 0;
  long long total_items_, done_items_ = 0;
  bool quiet_, terminal_, drawn_ = false;
  int last_tenth_ = 0;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace twin
