// Facts about Megatron-LM's command line, for the arguments twin writes (reports/megatron_args.hpp) and reads
// (core/megatron_scenario.hpp): each flag as `pretrain_gpt.py`'s argparse declares it, and the checks of
// `validate_args` (and of TransformerConfig) that a combination of them can fail. Read from NVIDIA/Megatron-LM
// at kMegatronCommit: megatron/training/arguments.py declares some flags itself and builds the others from the
// fields of its config dataclasses (megatron/training/argument_utils.py ArgumentGroupFactory: a bool field
// defaulting to false is a store_true flag, one defaulting to true is --no-X / --disable-X, a Literal or an enum
// gives the choices). `python3 tools/megatron_flag_facts.py MEGATRON_LM_CHECKOUT FLAG...` prints them again.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace twin {

inline constexpr std::string_view kMegatronCommit = "NVIDIA/Megatron-LM d98e8a64ddf3 (2026-08-22)";

enum class MegatronFlagKind {
  switch_on,  // action store_true (or store_false: the flag turns a default-true setting off); no value
  integer,    // type int
  real,       // type float
  choice,     // a string among `choices`
  frequency,  // moe_freq_type: an integer, or a Python list expression of 0s and 1s ("([0]*3+[1]*58)")
  integers,   // tuple_type: integers separated by commas ("4095,0")
  layout,     // a pipeline layout string (core/pipeline_layout.hpp: "Et|(tt|)*30mL")
};

struct MegatronFlag {
  std::string_view name;  // "--tensor-model-parallel-size"
  MegatronFlagKind kind;
  std::vector<std::string_view> choices;  // kind choice: the accepted values, as argparse spells them
  bool several = false;                   // nargs '+': one value or more
  std::string_view declared_at;           // file:line at kMegatronCommit
};

// Every flag twin writes or reads, in the order megatron_args.txt writes them.
const std::vector<MegatronFlag>& megatron_flags();
// The flag of that name ("--seq-length"), or nullptr when twin neither writes nor reads it.
const MegatronFlag* find_megatron_flag(std::string_view name);
// An integer as argparse's int() reads it, or none.
std::optional<long long> parse_integer_text(const std::string& text);

// One flag as given on a command line, with its values (none for a switch).
struct MegatronArgument {
  std::string flag;
  std::vector<std::string> values;
  bool operator==(const MegatronArgument&) const = default;
};

// Why `argument` is not what argparse accepts for a flag of the table ("expected an integer, got \"x\""), or
// nullopt when it is (or the flag is not in the table).
std::optional<std::string> megatron_value_error(const MegatronArgument& argument);

// A command line's arguments, looked up as argparse holds them: a flag given twice keeps its last values.
class MegatronArguments {
 public:
  explicit MegatronArguments(std::vector<MegatronArgument> arguments) : arguments_(std::move(arguments)) {}
  const std::vector<MegatronArgument>& all() const { return arguments_; }
  bool has(std::string_view flag) const { return find(flag) != nullptr; }
  // The first value, or `absent` when the flag is not given (a malformed number also reads as `absent`:
  // megatron_value_error tells it).
  long long integer(std::string_view flag, long long absent) const;
  double real(std::string_view flag, double absent) const;
  std::string text(std::string_view flag, std::string absent) const;
  const MegatronArgument* find(std::string_view flag) const;

 private:
  std::vector<MegatronArgument> arguments_;
};

// The first rule of Megatron's validate_args (or its TransformerConfig) that `arguments` break when launched on
// `world_size` ranks with CUDA_DEVICE_MAX_CONNECTIONS `device_max_connections` (nullopt: unset), as
// "--flag: what Megatron asserts (where)"; nullopt when none does. The values must be well formed.
std::optional<std::string> megatron_rule_broken(const MegatronArguments& arguments, long long world_size,
                                                const std::optional<std::string>& device_max_connections);

}  // namespace twin
