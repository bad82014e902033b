// Which version of its kernel `twin execute` runs for each op kind. A profile records the revisions its
// calibration timed and a run those it ran, so that folding a run into a profile (`twin calibrate
// --from-trace`) leaves out the ops of a kind whose kernel changed between the two: the run measured
// another kernel than the one the profile prices. Raise a kind's revision whenever its kernel's speed
// changes; a profile or run that records none ran revision 1 of every kind.
#pragma once
#include <nlohmann/json.hpp>

#include "core/op.hpp"

namespace twin {

// Each kind's revision is in its traits (OpKindTraits::kernel_revision, core/op_kinds.hpp); attention's
// implementation is chosen per run instead (core/attention_implementation.hpp).

// {"norm_backward": 2, ...}: every kind twin execute runs, as profiles and metrics.json record them.
nlohmann::json executor_kernel_revisions_json();

// The revision of `kind` in such a record (an object, or null for a record from before revisions: 1).
int recorded_kernel_revision(const nlohmann::json& revisions, OpKind kind);

}  // namespace twin
