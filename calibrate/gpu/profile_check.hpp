// `twin calibrate --check PROFILE`: the profile against fresh measurements taken with the same harnesses
// calibration uses, at points calibration did not measure: NCCL collectives at sizes between its table
// rows (nccl-tests timing, many iterations) predicted by the table the simulator reads, and GEMM shapes
// off its grid predicted as `twin simulate` prices them. Writes check.csv and check.md.
#pragma once
#include <cmath>
#include <string>
#include <vector>

#include "gpu/launcher.hpp"

namespace twin::gpu {

// One comparison; `limit_pct` bounds |error_pct|. Collectives carry nccl-tests' busbw of the measurement
// and of the prediction, and the fitted link model's error for reference.
struct CheckRow {
  std::string kind;        // "gemm", "attention_forward", "attention_backward" or a collective
  std::string shape;       // "m=.. n=.. k=.. ta=.. tb=.." or "S=<bytes>"
  std::string origin;      // GEMMs and attention: the model layer it comes from (off_grid_model_gemms, _attention)
  int ranks = 1;
  double size_bytes = 0;   // collectives: nccl-tests' S
  double measured_us = 0;          // GEMMs (and attention where the profile's is): at the profile's reference SM clock
  double predicted_us = 0;
  double limit_pct = 0;
  double tflops = 0;               // GEMMs: measured
  double busbw_GBps = 0;           // collectives: measured
  double profile_busbw_GBps = 0;   // collectives: from the prediction
  double fit_model_us = 0;         // collectives: the table's fitted latency/bandwidth model
  double measured_raw_us = 0;      // GEMMs and attention: as timed, at the clock the GPU ran at
  double sm_clock_MHz = 0;         // GEMMs and attention: that clock (GEMMs: median over rounds)
  double spread_pct = 0;           // GEMMs: (slowest - fastest round) / measured; attention: (p90 - p10) / median
  double neighbours_now_us = 0;    // GEMMs: the prediction from its measured neighbours re-timed now
  std::string kernel;              // GEMMs: the cuBLASLt kernel(s) CUPTI saw
  double error_pct() const { return 100.0 * (predicted_us - measured_us) / measured_us; }
  bool passes() const { return std::abs(error_pct()) <= limit_pct; }
};

std::string check_table_markdown(const std::vector<CheckRow>& rows);
std::string check_table_csv(const std::vector<CheckRow>& rows);

// The rank program of the check (one process per GPU, as calibration); rank 0 writes
// `out_dir`/check.{csv,md} and returns 1 when a row is outside its limit. GEMMs: the shapes of
// `gemm_shapes_path` (calibrate/gemm_shapes_file.hpp), or off_grid_model_gemms() when it is empty.
int check_profile_rank(const std::string& profile_path, const std::string& gemm_shapes_path, const std::string& out_dir,
                       long long max_message_bytes, const RankIdentity& identity);

}  // namespace twin::gpu
