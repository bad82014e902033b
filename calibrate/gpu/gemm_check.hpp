// The GEMM half of `twin calibrate --check`: shapes calibration did not measure, timed now with its
// harness and priced by the profile as `twin simulate` prices them. Each shape is timed in several rounds
// of a shuffled order (the spread between rounds is the noise floor of the comparison), and the measured
// neighbours its prediction interpolates between are re-timed in the same rounds, which separates
// interpolation error from a GPU that runs slower or faster now than when it was calibrated.
#pragma once
#include <string>
#include <vector>

#include "calibrate/gemm_grid.hpp"
#include "calibrate/gpu/profile_check.hpp"
#include "cost/profile.hpp"
#include "core/cluster.hpp"

namespace twin::gpu {

inline constexpr double kGemmLimitPct = 5;

// One CheckRow per shape of `gemms` that the profile did not measure (measured ones are skipped with a
// warning). Writes `out_dir`/gemm_rounds.csv: every timed shape (checked and neighbour), its profile time
// and its time in each round, and the cuBLASLt kernel that ran.
std::vector<CheckRow> check_gemms(const Profile& profile, const GpuSpec& gpu, const std::vector<ModelGemm>& gemms,
                                  const std::string& out_dir);

}  // namespace twin::gpu
