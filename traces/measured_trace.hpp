// Chrome Trace Event / Perfetto JSON of one rank's measured kernels, laid out like the simulated trace
// (traces/chrome_trace.hpp): pid = the global rank, one thread per CUDA stream, one complete ("X") event
// per kernel, named after the op it ran for, so the measured and simulated traces read alike.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "traces/measured_ops.hpp"

namespace twin {

// tid = the CUDA stream id, named by the op streams its kernels served ("compute (stream 7)", "tp+dp
// (stream 13)"; "stream 3" when it ran only kernels outside any op). An event's name is op_name() of
// its op (args: op_id "c<class>.<index>", op_index, kernel, iteration), or the kernel's name outside
// any op. ts/dur are microseconds from `origin_ns` (default: the earliest kernel start) with nanosecond
// precision; otherData.origin_ns keeps the absolute origin. Events are ordered by start, then stream,
// then end, so the bytes do not depend on the order of `kernels`. Throws as check_measured_kernels.
nlohmann::json measured_chrome_trace(const RankClass& rank_class, int rank, const std::vector<MeasuredKernel>& kernels,
                                     const std::string& title, std::optional<TimeNs> origin_ns = std::nullopt);

// Writes chrome_trace_text(measured_chrome_trace(...)) atomically.
void write_measured_chrome_trace(const std::filesystem::path& path, const RankClass& rank_class, int rank,
                                 const std::vector<MeasuredKernel>& kernels, const std::string& title,
                                 std::optional<TimeNs> origin_ns = std::nullopt);

}  // namespace twin
