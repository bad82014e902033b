// The host's pace of issuing the experts' GEMMs: one grouped GEMM of 128 calls (256 rows each, an MoE expert's FC1
// of 1,536 columns over 2,048) issued right after the host waited for the device, as `twin execute` issues them after
// the MoE dispatch's host read, through the executor's own GroupedMatmul (gpu/grouped_matmul.hpp). The host's time
// for the calls over their count is the profile's grouped_gemm_issue_ns (cost/profile.hpp).
#pragma once

namespace twin::gpu {

// The median over seven repetitions, in ns per call, on the current device.
double measure_grouped_gemm_issue_ns();

}  // namespace twin::gpu
