// How far the ranks of a group drift apart between the moments their compute is aligned, as a profile states it
// for one kind of GPU (the optional "rank_drift" key of a GPU's kernel profile). sim/rank_drift.hpp holds the model
// that reads it: the last of n ranks arrives at a collective e_n (fixed_ns + rate x T) after the group's mean, T
// the compute since the group was last aligned. Measured from every rank's NCCL kernel starts in twin execute runs
// (tests/gpu/nccl_drift_fit.py); docs/PROFILES.md, "Ranks that drift apart", names the runs of each value.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_reader.hpp"

namespace twin {

struct RankDrift {
  // One standard deviation of a rank's arrival that does not grow with the compute since the group was aligned:
  // launch and host jitter, in ns.
  double fixed_ns = 0;
  // One standard deviation of a rank's compute time over its mean (GPU-to-GPU and clock-to-clock speed): the
  // arrivals spread by rate x T after T of compute.
  double rate = 0;
  std::string source;  // the runs the values were measured on
  bool enabled() const { return fixed_ns > 0 || rate > 0; }
  bool operator==(const RankDrift&) const = default;
};

// The key's object; errors name their JSON path: fixed_ns in [0, 1e9], rate in [0, 1], source a non-empty string.
RankDrift read_rank_drift(const JsonReader& r);
nlohmann::json rank_drift_json(const RankDrift& drift);

}  // namespace twin
