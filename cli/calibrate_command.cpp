// `twin calibrate`: options and the hand-over to calibrate/gpu (built only with the CUDA toolkit).
#include <CLI/CLI.hpp>

#include "calibrate/gpu/calibration.hpp"
#include "cli/commands.hpp"

namespace twin {

struct CalibrateOptions {
  gpu::CalibrationRequest request;
  CLI::App* command = nullptr;
};

namespace {
// CLI11 keeps pointers to the option targets, so they live as long as the program.
CalibrateOptions& calibrate_options() {
  static CalibrateOptions options;
  return options;
}
}  // namespace

CalibrateOptions& add_calibrate_command(CLI::App& app) {
  CalibrateOptions& options = calibrate_options();
  CLI::App* calibrate = app.add_subcommand(
      "calibrate",
      "Measure this machine's GPUs and write a profile: cuBLASLt GEMMs timed with CUPTI, NCCL all-reduce, all-gather,\n"
      "reduce-scatter, all-to-all and send/recv over every group size (nccl-tests' busbw), overlap interference and\n"
      "usable memory. One process per GPU (started here, or by mpirun/srun with NCCL_COMM_ID set).");
  calibrate->add_option("--scenario", options.request.scenario,
                        "also measure the exact GEMM shapes of this scenario's feasible candidate strategies")
      ->check(CLI::ExistingFile);
  calibrate->add_option("--out", options.request.out, "profile to write (atomically)")->capture_default_str();
  calibrate->add_option("--gpus", options.request.gpus, "use the first N GPUs (default: all)")->check(CLI::NonNegativeNumber);
  calibrate->add_flag("--quick", options.request.quick, "fewer shapes, sizes (powers of 4) and repetitions");
  calibrate->add_option("--max-message-bytes", options.request.max_message_bytes,
                        "largest collective message (nccl-tests' S)")
      ->capture_default_str()
      ->check(CLI::Range(4096ll, 1ll << 33));
  calibrate->add_option("--check", options.request.check_profile,
                        "instead of calibrating, check PROFILE against fresh measurements of collective sizes and GEMM\n"
                        "shapes it did not measure (same harnesses); writes check.csv and check.md, exits 1 on a miss")
      ->check(CLI::ExistingFile);
  calibrate->add_option("--check-out", options.request.check_out, "directory for the --check tables")
      ->capture_default_str();
  calibrate->footer(
      "Examples:\n"
      "  twin calibrate --out my.json\n"
      "  twin calibrate --scenario scenarios/llama3-8b-4xH200.json --out my.json\n"
      "  twin calibrate --check my.json --check-out check/\n"
      "  twin simulate scenarios/llama3-8b-4xH200.json --profile my.json");
  options.command = calibrate;
  return options;
}

bool calibrate_selected(const CLI::App& app) { return app.got_subcommand("calibrate"); }

int run_calibrate(const CLI::App&) {
  return gpu::calibrate_main(calibrate_options().request);
}

}  // namespace twin
