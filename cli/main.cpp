// twin: the command line. Each subcommand is a thin layer over the libraries; errors in the user's
// input print one line (file, JSON path, expectation) and exit 1; usage errors exit 2.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>
#include <iostream>
#include <new>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "cli/commands.hpp"
#include "cli/gpu_binary.hpp"
#include "core/allocator.hpp"
#include "core/error_line.hpp"
#include "core/json_reader.hpp"
#include "core/output_folder.hpp"

int main(int argc, char** argv) {
  twin::keep_freed_memory_for_reuse();
  twin::install_interrupt_cleanup();  // SIGINT/SIGTERM remove what a run was writing
  spdlog::set_default_logger(spdlog::stderr_color_mt("twin"));
  spdlog::set_pattern("%^[%l]%$ %v");
  twin::remember_command_line(argc, argv);
#ifdef TWIN_GPU_BINARY
  // twin execute runs in twin-gpu whole (its options and help included).
  if (argc > 1 && std::string(argv[1]) == "execute") return twin::run_gpu_binary();
#endif

  CLI::App app{"twin: a digital twin of distributed LLM training.\n"
               "Simulates every parallel strategy of a scenario and ranks them."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("twin ") + twin::kTwinVersion);
  twin::SimulateOptions simulate;
  twin::add_simulate_command(app, simulate);
  twin::ReportOptions report;
  twin::add_report_command(app, report);
  twin::ValidateOptions validate;
  twin::add_validate_command(app, validate);
  twin::add_calibrate_command(app);
  twin::SweepOptions sweep;
  twin::add_sweep_command(app, sweep);
#ifdef TWIN_WITH_CUDA
  twin::add_execute_command(app);
#elif defined(TWIN_GPU_BINARY)
  app.add_subcommand("execute", "Run a plan on this machine's GPUs (in twin-gpu, beside twin: twin execute --help)");
#endif

  // CLI11 answers an unknown subcommand with "A subcommand is required"; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    const std::string word = argv[1];
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      std::fprintf(stderr, "twin: unknown command '%s' (expected one of: %s; see twin --help)\n",
                   twin::printable_line(word.substr(0, 60)).c_str(), twin::join_names(names).c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  try {
    if (app.got_subcommand("simulate")) return twin::run_simulate(simulate);
    if (app.got_subcommand("sweep")) return twin::run_sweep(sweep);
    if (app.got_subcommand("report")) return twin::run_report(report);
    if (app.got_subcommand("validate")) return twin::run_validate(validate);
    if (twin::calibrate_selected(app)) return twin::run_calibrate(app);
#ifdef TWIN_WITH_CUDA
    if (twin::execute_selected(app)) return twin::run_execute(app);
#endif
  } catch (const std::bad_alloc&) {
    // The last resort: the up-front estimates (README "Limits") refuse the inputs known to need this much.
    const std::vector<CLI::App*> chosen = app.get_subcommands();
    spdlog::error("twin {}: ran out of memory (the process could allocate no more): the input asks for more work "
                  "than this machine's memory holds; narrow it (for a scenario: a smaller training.global_batch_size "
                  "or larger micro_batch_size, fewer nodes, fewer search options; for a run folder: smaller files) "
                  "or run where more memory is allowed",
                  chosen.empty() ? std::string("") : chosen.front()->get_name());
    return 1;
  } catch (const std::exception& e) {  // InputError and any other: one line, control bytes escaped
    spdlog::error("{}", twin::error_line(e));
    return 1;
  }
  return 2;
}
