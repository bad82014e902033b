// A run described as it is launched: a Megatron-LM command line (core/megatron_command_line.hpp) read into a
// scenario's model, training, framework and pinned strategy, the reverse of megatron_args.txt
// (reports/megatron_args.hpp). The cluster, the name, the profile and what Megatron takes from elsewhere (the
// vocabulary from the tokenizer unless --vocab-size; the MoE routing imbalance, a property of data and router)
// come from a base scenario. An absent flag means Megatron's default at kMegatronCommit, as a launch would run it
// (dropout 0.1, LayerNorm, learned positions, GeLU, biases, tied embeddings, no overlaps): the flags, not the base
// scenario, describe the run. docs/BRIDGES.md lists the mapping.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/megatron_command_line.hpp"
#include "core/scenario.hpp"

namespace twin {

struct MegatronScenario {
  Scenario scenario;
  // One line per part of the command line that changes nothing twin prices, or that twin prices otherwise than
  // Megatron would run it (an unknown flag with its values, the environment, the launcher): never dropped silently.
  std::vector<std::string> not_modelled;
};

// Throws InputError naming `source` (the file) and the flag: a rule of Megatron's validate_args the command line
// breaks on the base scenario's cluster (core/megatron_flags.hpp megatron_rule_broken), a flag whose value twin
// cannot model (--position-embedding-type yarn, --cp-comm-type a2a, --optimizer muon, experts sharded over TP),
// a required flag missing (--num-layers, --hidden-size, --num-attention-heads, --seq-length, --micro-batch-size),
// or a value the scenario format refuses.
MegatronScenario scenario_from_megatron_command_line(const Scenario& base, const MegatronCommandLine& command,
                                                     const std::string& source);

// Reads the file (core/input_file.hpp: a regular file of at most 64 MiB) and its command line.
MegatronScenario load_megatron_args(const Scenario& base, const std::filesystem::path& path);

}  // namespace twin
