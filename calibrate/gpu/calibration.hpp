// `twin calibrate` end to end: with no rank in the environment it starts one process per GPU; the ranks measure
// collectives and interference together, then each times its share of the GEMMs, and rank 0 merges them, times
// the other kernels, fits the models and writes the profile atomically. An interrupted run writes no profile; the
// GEMM timings it made stay in partial files beside --out that the same command continues.
#pragma once
#include <string>

namespace twin::gpu {

struct CalibrationRequest {
  std::string scenario;  // empty: the default grid only
  std::string out = "calibrated-profile.json";
  int gpus = 0;          // 0: every GPU of the machine
  bool quick = false;
  bool quiet = false;    // no progress lines: warnings and errors only
  // Non-empty (with `scenario`): add to this profile the scenario's shapes it lacks (calibrate/gpu/profile_increment.hpp).
  std::string profile;
  long long max_message_bytes = 1ll << 30;
  // Non-empty: check this profile instead of calibrating (calibrate/gpu/profile_check.hpp), writing
  // check.csv and check.md into `check_out`.
  std::string check_profile;
  std::string check_out = ".";
  std::string check_gemms;  // with check_profile: a JSON list of GEMM shapes instead of the built-in set
  // With `profile`: measure only the sustained-clock curve (calibrate/gpu/sustained_clock.hpp) on every GPU and
  // write it into that profile's kernel section of this GPU (`out`), every other entry as it was.
  bool sustained_clock_only = false;
  // With `profile`: measure only the collective tables (every group size, the all-to-all in blocks per peer too)
  // and add to that profile the tables it lacks for this GPU (`out`), every other entry as it was.
  bool collectives_only = false;
  // Also measure the power model's loads after the BF16 curve (cost/power_model.hpp, ~18 s on one H200). Off by
  // default since 2026-12-01: where a profile has the curve, which every calibration measures, the curve prices.
  bool power_model = false;
};

// Returns the process exit code; prints progress and errors on stderr.
int calibrate_main(const CalibrationRequest& request);

}  // namespace twin::gpu
