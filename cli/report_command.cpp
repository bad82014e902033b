// `twin report RUN_DIR`: read an executed run folder back and write execution_report.html (predicted
// against measured). Needs no GPU; everything it reads was written by `twin simulate` and `twin execute`.
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "cli/commands.hpp"
#include "core/atomic_file.hpp"
#include "reports/execution_report.hpp"
#include "reports/execution_summary.hpp"
#include "reports/format.hpp"

namespace twin {

void add_report_command(CLI::App& app, ReportOptions& options) {
  CLI::App* sub = app.add_subcommand(
      "report",
      "Rebuild the predicted-against-measured report of an executed run (no GPU needed). Reads from RUN_DIR:\n"
      "  best.json     the plan `twin simulate` wrote (or --plan)\n"
      "  metrics.json  and ops.csv, written by `twin execute --best --run RUN_DIR`\n"
      "  traces/measured_rank<r>.json  the measured timeline, where traced\n"
      "and writes execution_report.html: per iteration, per op kind, per collective, per rank, the largest\n"
      "contributors to the error, an op-by-op scatter and the simulated and measured timelines");
  sub->add_option("run_dir", options.run_dir, "The run folder of `twin execute`")->required();
  sub->add_option("--out", options.out, "The HTML file to write (default: RUN_DIR/execution_report.html)");
  sub->add_option("--plan", options.plan, "The plan that was executed (default: RUN_DIR/best.json)");
  sub->add_option("--rank", options.rank,
                  "The rank whose measured timeline is shown (default: the lowest rank with a trace)")
      ->check(CLI::Range(0, 1 << 30));
}

int run_report(const ReportOptions& options) {
  const std::filesystem::path dir = options.run_dir;
  RunFolderOptions folder;
  folder.plan = options.plan;
  if (options.rank >= 0) folder.timeline_rank = options.rank;
  const ExecutedRun run = load_executed_run(dir, folder);
  const ExecutionSummary summary = summarize_execution(run);
  const std::filesystem::path out =
      options.out.empty() ? dir / "execution_report.html" : std::filesystem::path(options.out);
  if (!out.parent_path().empty()) std::filesystem::create_directories(out.parent_path());
  write_file_atomically(out, execution_report_html(run, summary));

  std::printf("%s on %d x %s: predicted %s ms, measured %s ms (%s%s%%)\n", run.metrics.strategy.c_str(),
              run.metrics.world_size, run.metrics.device.c_str(),
              milliseconds_text(summary.predicted_iteration_ns).c_str(),
              milliseconds_text(summary.measured_iteration_ns).c_str(),
              summary.error && *summary.error >= 0 ? "+" : "", summary.error ? fixed(100 * *summary.error, 1).c_str() : "?");
  if (!summary.contributors.empty())
    std::printf("largest contributor: %s (%s ms)\n", summary.contributors.front().label().c_str(),
                milliseconds_text(summary.contributors.front().difference_ns()).c_str());
  std::printf("wrote %s\n", out.string().c_str());
  return 0;
}

}  // namespace twin
