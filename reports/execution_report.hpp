// execution_report.html: one self-contained page (inline SVG, no network) that sets an executed run
// against its plan: the headline numbers, per step, per op kind, per collective, per rank, the largest
// contributors to the difference, a predicted-vs-measured scatter of the ops and the simulated and
// measured timelines of one rank on one time axis. Same input, same bytes.
#pragma once
#include <filesystem>
#include <string>

#include "reports/execution_run.hpp"
#include "reports/execution_summary.hpp"

namespace twin {

std::string execution_report_html(const ExecutedRun& run, const ExecutionSummary& summary);

// Summarises `run` and writes the page atomically.
void write_execution_report(const std::filesystem::path& path, const ExecutedRun& run);

}  // namespace twin
