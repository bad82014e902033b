// The power model's clock and a plan's predicted step for a run's best.json, with a profile: the plan's scenario
// with its strategy pinned, lowered (strategies/lowering.hpp) and replayed (sim/simulate.hpp), and each rank class's
// clock and power by sim/step_clock.hpp. Prints one JSON line: {"iteration_s", "classes": [{"clock_MHz", "power_W",
// "power_at_max_W", "tflop", "gb", "busy_ms"}]}. The same library calls `twin simulate` makes for a pinned
// strategy, without its reports: for the power model's held-out checks while twin was not built (2026-11-29,
// docs/ACCURACY.md "The power model"). Not part of the CMake build; linked by tests/gpu/power_loads/build.sh.
// Usage: step_clock_of_plan BEST_JSON PROFILE
#include <cstdio>
#include <exception>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/scenario.hpp"
#include "cost/profile.hpp"
#include "sim/simulate.hpp"
#include "sim/step_clock.hpp"
#include "strategies/lowering.hpp"
#include "strategies/validity.hpp"

int main(int argc, char** argv) {
  try {
    using namespace twin;
    if (argc != 3) throw std::invalid_argument("usage: step_clock_of_plan BEST_JSON PROFILE");
    const nlohmann::json plan = nlohmann::json::parse(std::ifstream(argv[1]));
    nlohmann::json document = plan.at("scenario");
    document.erase("search");
    document["strategy"] = plan.at("strategy");
    const Scenario scenario = parse_scenario(document, argv[1]);
    Strategy strategy = *scenario.strategy;
    if (auto why = complete_strategy(scenario, strategy)) throw std::invalid_argument(*why);
    const Profile profile = load_profile(argv[2]);
    const IterationGraph graph = lower_to_op_graphs(scenario, strategy, profile);
    const IterationResult result = simulate_iteration(graph, scenario.cluster, profile);
    nlohmann::json out = {{"iteration_s", result.iteration_ns * 1e-9}, {"classes", nlohmann::json::array()}};
    for (const RankClass& rank_class : graph.classes) {
      const GpuSpec& gpu = scenario.cluster.node_groups.at(rank_class.node_group).gpu;
      const GpuKernelProfile& kernels = profile.kernels_for(gpu);
      const StepWork work = sim::step_work(rank_class, profile, gpu, nullptr);
      const double clock_MHz = sim::step_clock(rank_class, profile, gpu, nullptr).sm_MHz;
      nlohmann::json entry = {{"clock_MHz", clock_MHz}, {"tflop", work.flops * 1e-12}, {"gb", work.bytes * 1e-9},
                              {"busy_ms", (work.clocked_ns + work.unclocked_ns) * 1e-6}};
      if (kernels.power_model.present()) {
        entry["power_W"] = step_power_W(kernels.power_model, work, clock_MHz);
        entry["power_at_max_W"] = step_power_W(kernels.power_model, work, kernels.power_model.max_sm_clock_MHz);
      }
      out["classes"].push_back(entry);
    }
    std::printf("%s\n", out.dump().c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "step_clock_of_plan: %s\n", e.what());
    return 1;
  }
}
