// The attention part of `twin calibrate --check`: attention shapes calibration did not measure
// (calibrate/attention_check_shapes.hpp), timed now with calibration's own harness (the kernel calibration, its
// clock probe included) and priced by the profile on the micro-benchmark basis (benchmark_kernel_time_ns).
#pragma once
#include <vector>

#include "calibrate/attention_check_shapes.hpp"
#include "calibrate/gpu/profile_check.hpp"
#include "core/cluster.hpp"
#include "cost/profile.hpp"

namespace twin::gpu {

// The issue-43 aim for attention off the grid.
inline constexpr double kAttentionLimitPct = 5;

// One CheckRow per shape of `shapes` the profile did not measure (a measured one is skipped with a warning) and
// the executor's attention runs. Measured times are at the profile's reference clock where its attention timings
// are (attention_at_reference_clock), else as timed.
std::vector<CheckRow> check_attention(const Profile& profile, const GpuSpec& gpu, const std::vector<ModelAttention>& shapes);

}  // namespace twin::gpu
