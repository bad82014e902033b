// `twin calibrate --from-nccl-tests LOG...`: nccl-tests runs (calibrate/nccl_tests_log.hpp) become
// collective tables as `twin calibrate` measures them (cost/collective_tables.hpp), and are folded
// into a profile: a table over a placement the profile already holds is replaced, any other added.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "calibrate/nccl_tests_log.hpp"
#include "cost/profile.hpp"

namespace twin {

// One run as a table: the GPU preset from the Rank lines' device name (or `gpu`, a preset name, when
// given), group size = ranks, nodes = distinct hosts (each must hold as many ranks), the rows' size and
// out-of-place time with algbw = size / time and busbw = algbw x nccl-tests' factor, and the link model
// fitted as `twin calibrate` fits it, over the GPU's NVLink bandwidth (PCIe where it has none). Throws
// InputError naming the log and line.
CollectiveTable collective_table_from_run(const NcclTestsRun& run, const std::optional<std::string>& gpu);

struct NcclTestsFold {
  Profile profile;                   // with the tables, builtin false, provenance.nccl_tests appended
  std::vector<std::string> summary;  // one line per table: what, from where, added or replaced
};

// Folds every run of every log into `profile`. Two runs of one table (same GPU, collective and placement)
// are an error naming both.
NcclTestsFold fold_nccl_tests(Profile profile, const std::vector<NcclTestsRun>& runs,
                              const std::optional<std::string>& gpu);

}  // namespace twin
