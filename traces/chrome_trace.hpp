// Chrome Trace Event / Perfetto JSON of one simulated iteration, laid out like PyTorch's kineto:
// one process per rank class (pid = its representative global rank), one thread per GPU stream,
// one complete ("X") event per op, and flow arrows from each pipeline send to its receive.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/op_graph.hpp"
#include "sim/result.hpp"

namespace twin {

// `result` must carry op timings (SimOptions::record_op_timings) for every class of `graph`;
// throws std::invalid_argument otherwise. `title` names the run (the strategy key) in otherData.
// ts/dur are microseconds with nanosecond precision (ts * 1000 is exactly the simulated ns).
nlohmann::json chrome_trace(const IterationGraph& graph, const IterationResult& result, const std::string& title);

// The trace as text: one event per line (diffable, streamable), same bytes for the same input.
std::string chrome_trace_text(const nlohmann::json& trace);

// Writes chrome_trace_text atomically (PATH.tmp, then rename); gzip-compressed where PATH ends in ".gz" (Perfetto
// and chrome://tracing open .json.gz as they are).
void write_chrome_trace(const std::filesystem::path& path, const IterationGraph& graph,
                        const IterationResult& result, const std::string& title);

}  // namespace twin
