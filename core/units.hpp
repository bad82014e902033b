// Units shared by every folder: time is integer nanoseconds, sizes are bytes.
// Bandwidths carry their unit in the name (GBps = 1e9 bytes/s, Gbps = 1e9 bits/s).
#pragma once
#include <cstdint>

namespace twin {

using TimeNs = std::int64_t;
using Bytes = std::int64_t;

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
inline constexpr double kGB = 1e9;
inline constexpr TimeNs kNsPerUs = 1000;
inline constexpr TimeNs kNsPerMs = 1000 * 1000;
inline constexpr TimeNs kNsPerS = 1000 * 1000 * 1000;

// Seconds to move `bytes` at `bandwidth_GBps`, in nanoseconds (GB/s == bytes/ns).
inline double transfer_ns(double bytes, double bandwidth_GBps) { return bytes / bandwidth_GBps; }

inline double to_seconds(TimeNs t) { return static_cast<double>(t) * 1e-9; }

}  // namespace twin
