#include "calibrate/gpu/attention_check.hpp"

#include <map>
#include <string>

#include <spdlog/spdlog.h>

#include "calibrate/gpu/kernel_calibration.hpp"
#include "cost/sm_clock.hpp"

namespace twin::gpu {

std::vector<CheckRow> check_attention(const Profile& profile, const GpuSpec& gpu, const std::vector<ModelAttention>& shapes) {
  const GpuKernelProfile& kernels = profile.kernels_for(gpu);
  KernelOps ops;
  std::map<std::string, const ModelAttention*> checked;
  for (const ModelAttention& a : shapes) {
    const std::string key = kernel_shape_key(a.op);
    if (kernels.measured.count(key)) {
      spdlog::warn("[check] {} ({}) was measured by calibration: not an independent check, skipped", key, a.origin);
      continue;
    }
    ops.ops.push_back(a.op);
    checked.emplace(key, &a);
  }
  spdlog::info("[check] {} attention shapes, timed as calibration times them{}", ops.ops.size(),
               kernels.attention_at_reference_clock ? " and scaled to the reference clock" : "");
  const KernelCalibration timed = calibrate_kernels(ops, gpu, kernels, /*quick=*/false, {});
  for (const std::string& skipped : timed.skipped) spdlog::warn("[check] attention not run: {}", skipped);
  std::vector<CheckRow> rows;
  for (const auto& [key, m] : timed.measured) {
    const ModelAttention& a = *checked.at(key);
    CheckRow row;
    row.kind = to_string(a.op.kind);
    row.shape = key.substr(key.find(':') + 1);
    row.origin = a.origin;
    row.measured_us = m.median_ns * 1e-3;
    row.predicted_us = benchmark_kernel_time_ns(kernels, gpu, a.op) * 1e-3;
    row.limit_pct = kAttentionLimitPct;
    row.sm_clock_MHz = m.sm_clock_MHz;
    const bool scaled = kernels.attention_at_reference_clock && kernels.reference_sm_clock_MHz > 0 && m.sm_clock_MHz > 0;
    row.measured_raw_us =  // back from the reference clock to the one it ran at, by the law calibration scaled it with
        scaled ? time_at_sm_clock_ns(row.measured_us, kernels.reference_sm_clock_MHz, m.sm_clock_MHz, sm_clock_exponent(a.op))
               : row.measured_us;
    row.spread_pct = 100 * (m.p90_ns - m.p10_ns) / m.median_ns;
    rows.push_back(row);
  }
  return rows;
}

}  // namespace twin::gpu
