// The pipeline's settings (pipeline/simulate_run.hpp) from the options twin simulate and twin sweep share.
#pragma once
#include "pipeline/simulate_run.hpp"

namespace twin {

template <class Options>
SimulateSettings simulate_settings(const Options& options) {
  SimulateSettings settings;
  settings.profile = options.profile;
  settings.scale_profile = options.scale_profile;
  settings.out = options.out;
  settings.top = options.top;
  settings.jobs = options.jobs;
  settings.exhaustive = options.exhaustive;
  settings.full_replay = options.full_replay;
  settings.quiet = options.quiet;
  return settings;
}

}  // namespace twin
