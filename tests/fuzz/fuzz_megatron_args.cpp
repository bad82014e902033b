// libFuzzer target for a Megatron-LM command line (twin simulate --megatron-args): split as a shell would, then
// read into a scenario on a fixed cluster. It must give a scenario or throw InputError; any other exception, a
// crash, a sanitizer report or a hang is a bug.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "core/megatron_scenario.hpp"

namespace {

const twin::Scenario& base() {
  static const twin::Scenario scenario = twin::parse_scenario_text(R"({
    "model": { "preset": "llama2-7b" }, "training": { "seq_length": 4096, "global_batch_size": 64 },
    "cluster": { "nodes": [ { "count": 2, "gpu": "H100-SXM-80GB", "gpus_per_node": 8,
                            "nics": { "count": 8, "bandwidth_Gbps": 400 } } ] } })",
                                                                   "base.json");
  return scenario;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    twin::scenario_from_megatron_command_line(base(), twin::parse_megatron_command_line(text, "fuzz.sh"), "fuzz.sh");
  } catch (const twin::InputError&) {
    // the expected outcome for bad input
  } catch (const std::exception& e) {
    std::fprintf(stderr, "the Megatron command-line reader threw a non-InputError: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "the Megatron command-line reader threw a non-exception\n");
    std::abort();
  }
  return 0;
}
