// A Megatron-LM command line as a user writes it, split into its parts: the environment set before the command
// (`CUDA_DEVICE_MAX_CONNECTIONS=1 torchrun ...`), the launcher's words up to the script (`torchrun --nproc-per-node
// 8 pretrain_gpt.py`), and the script's arguments. The text is read as a shell reads one command: words split at
// blanks and newlines, a backslash before a newline continues the line, '#' at the start of a word comments out
// the rest of its line (so megatron_args.txt reads as it is written), 'single' and "double" quotes and a backslash
// escape. A shell expansion ($VAR, $(...), `...`) is an error naming it: twin cannot know its value.
#pragma once
#include <string>
#include <vector>

#include "core/megatron_flags.hpp"

namespace twin {

struct MegatronCommandLine {
  std::vector<std::string> environment;     // "NAME=value" before the command
  std::vector<std::string> launcher;        // the words before the arguments, the script (*.py) last
  std::vector<MegatronArgument> arguments;  // in the order given; --flag=value split
  std::vector<int> argument_lines;          // the line each argument starts on (1-based), for messages
};

// Throws InputError naming `source` and the line: an unclosed quote, a shell expansion, a word where a flag
// (--name) was expected, or a flag of the table (core/megatron_flags.hpp) with a value argparse would refuse.
// A flag twin does not know keeps the words after it, up to the next flag, as its values.
MegatronCommandLine parse_megatron_command_line(const std::string& text, const std::string& source);

}  // namespace twin
