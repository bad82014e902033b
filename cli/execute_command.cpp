// `twin execute`: options and the hand-over to executor/ (built only with the CUDA toolkit).
#include <cstdint>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "cli/commands.hpp"
#include <stdexcept>
#include "executor/gpu/execute.hpp"

namespace twin {

struct ExecuteOptions {
  exec::ExecuteRequest request;
  bool best = false;
  std::string run;
  std::string attention = to_string(kDefaultAttentionImplementation);
};

namespace {
ExecuteOptions& execute_options() {
  static ExecuteOptions options;  // CLI11 keeps pointers to the option targets
  return options;
}
// Megatron's recipe flags, each over the plan's training recipe when given (core/training_recipe.hpp).
void add_recipe_options(CLI::App& execute, TrainingRecipeFlags& recipe) {
  execute.add_option_function<double>("--lr", [&recipe](const double& v) { recipe.lr = v; },
                                      "peak learning rate (default: the plan's training.lr, else 3e-4)")
      ->check(CLI::Range(0.0, 1.0));
  execute.add_option_function<double>("--min-lr", [&recipe](const double& v) { recipe.min_lr = v; },
                                      "the decay's floor (training.min_lr)")
      ->check(CLI::Range(0.0, 1.0));
  execute.add_option_function<std::int64_t>(
            "--lr-warmup-iters", [&recipe](const std::int64_t& v) { recipe.lr_warmup_iters = v; },
            "linear warm-up from 0 (training.lr_warmup_iters)")
      ->check(CLI::NonNegativeNumber);
  execute.add_option_function<std::int64_t>(
            "--lr-decay-iters", [&recipe](const std::int64_t& v) { recipe.lr_decay_iters = v; },
            "where the decay reaches --min-lr (training.lr_decay_iters; default: --iters)")
      ->check(CLI::PositiveNumber);
  execute.add_option_function<std::string>(
            "--lr-decay-style",
            [&recipe](const std::string& v) { recipe.lr_decay_style = lr_decay_style_from_string(v); },
            "constant, linear or cosine (training.lr_decay_style)")
      ->check(CLI::IsMember(lr_decay_style_names()));
  execute.add_option_function<double>("--clip-grad", [&recipe](const double& v) { recipe.clip_grad = v; },
                                      "global gradient norm to clip to, 0: none (training.clip_grad)")
      ->check(CLI::NonNegativeNumber);
}
}  // namespace

ExecuteOptions& add_execute_command(CLI::App& app) {
  ExecuteOptions& o = execute_options();
  CLI::App* execute = app.add_subcommand(
      "execute",
      "Train the plan's model with the plan's strategy on this machine's GPUs (one process per GPU, or the ranks\n"
      "of mpirun/srun), op for op as the simulator priced it; writes losses, iteration times, MFU, peak memory,\n"
      "CUPTI traces per rank, ops.csv and predicted-vs-measured into the run folder.");
  auto* best = execute->add_flag("--best", o.best, "run the best plan of a `twin simulate` output folder (--run)");
  execute->add_option("--run", o.run, "the `twin simulate --out` folder: reads best.json, writes the results there");
  execute->add_option("--plan", o.request.plan, "a plan file (best.json) to run instead")
      ->excludes(best);
  execute->add_option("--iters", o.request.iterations, "training iterations")->capture_default_str()->check(CLI::PositiveNumber);
  execute->add_option("--warmup", o.request.warmup, "first iterations left out of the timing")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_recipe_options(*execute, o.request.recipe);
  execute->add_option("--seed", o.request.seed, "seed of the weights and the data")->capture_default_str();
  execute->add_option("--nccl-timeout", o.request.nccl_timeout_s,
                      "seconds after which an unfinished iteration counts as a NCCL hang: all ranks stop, naming "
                      "the rank and the op")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  execute->add_flag("!--no-trace", o.request.trace, "skip CUPTI kernel records (no traces, no ops.csv)");
  execute->add_option("--attention", o.attention,
                      "attention: cudnn (cuDNN's fused flash attention; its backward adds dQ with fp32 atomics), "
                      "cudnn-deterministic (a bit-reproducible backward, about 2x slower) or kernels (twin's own); "
                      "`twin calibrate` times the default")
      ->capture_default_str()
      ->check([](const std::string& name) {
        return attention_implementation_from_string(name) ? std::string()
                                                        : "expected cudnn, cudnn-deterministic or kernels";
      });
  execute->footer(
      "Examples:\n"
      "  twin simulate scenarios/llama3-8b-4xH200.json --out run/ && twin execute --best --run run/ --iters 20\n"
      "  twin execute --plan run/best.json --run run2/");
  return o;
}

bool execute_selected(const CLI::App& app) { return app.got_subcommand("execute"); }

int run_execute(const CLI::App&) {
  ExecuteOptions& o = execute_options();
  if (o.request.plan.empty()) {
    if (!o.best || o.run.empty()) throw std::invalid_argument("twin execute: give --best --run DIR, or --plan best.json");
    o.request.plan = (std::filesystem::path(o.run) / "best.json").string();
  }
  o.request.run_dir = o.run;
  o.request.attention = *attention_implementation_from_string(o.attention);  // checked by the option
  return exec::execute_main(o.request);
}

}  // namespace twin
