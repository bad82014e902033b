// `twin calibrate [--scenario S] --profile P`: a profile this machine's calibration wrote, completed with the exact
// shapes of a scenario that it lacks (GEMMs and the other kernels) and with the kernel grid's shapes it lacks (a
// profile of an older grid: head dims 96 and 256, capped losses), timed as a full calibration times them and scaled
// to the profile's reference clock; its collectives, fits, GEMM grid and every other entry are kept.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "calibrate/gpu/calibration_profile.hpp"
#include "calibrate/gpu/kernel_calibration.hpp"
#include "core/cluster.hpp"
#include "core/op.hpp"
#include "cost/profile.hpp"

namespace twin::gpu {

struct ProfileIncrement {
  std::string path;
  Profile base;
  std::vector<GemmShape> gemms;   // the scenario's GEMM shapes without an entry, in the scenario's order
  KernelOps kernels;              // likewise, its other kernels
  KernelOps grid;                 // the default kernel grid's shapes without an entry (not among `kernels`)
  double reference_sm_clock_MHz = 0;
};

// `scenario` may be empty (the grid's shapes only). Throws InputError when `profile` has no kernels of
// `preset_name` (another GPU's calibration) or no reference clock (not a profile `twin calibrate` measured).
ProfileIncrement profile_increment(const std::string& profile, const std::string& scenario,
                                   const std::string& preset_name);

// The base profile with `run.gemms` and the missing kernels (timed here) added; provenance.increments records
// what was added, when and by which command.
Profile profile_with_scenario_shapes(const ProfileIncrement& increment, const CalibrationRun& run,
                                     const std::function<void(const std::string&)>& progress);

}  // namespace twin::gpu
