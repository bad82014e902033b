// Reading the user's input files safely: only regular files (a FIFO or /dev/zero would block or never
// end), at most a stated size, and JSON without duplicate keys, absurd nesting or numbers beyond a double.
// Every failure is an InputError naming the file and, for JSON, the path of the offending value.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace twin {

// The largest input twin reads by default: scenarios, profiles, plans and metrics are far smaller.
inline constexpr std::uintmax_t kMaxInputBytes = std::uintmax_t{64} << 20;
// Run folders' ops.csv and measured traces grow with the run; they may be larger.
inline constexpr std::uintmax_t kMaxRunFileBytes = std::uintmax_t{1} << 30;

// The whole content of the regular file at `path`. `expected` says what the file should be ("a scenario
// JSON"); errors read "<path>: cannot open the file (expected <expected>)", "... is not a regular file",
// "... is N bytes, more than the limit of M".
std::string read_input_file(const std::filesystem::path& path, std::string_view expected,
                            std::uintmax_t max_bytes = kMaxInputBytes);

// The same checks of type and size as read_input_file, then the file opened for reading in pieces (a reader
// that streams a large file must still stop at `max_bytes`: the file may grow while it is read).
std::ifstream open_input_file(const std::filesystem::path& path, std::string_view expected,
                              std::uintmax_t max_bytes = kMaxInputBytes);

// Parses `text` as JSON. Rejects, naming `file` and the JSON path: a key given twice in one object, nesting
// deeper than 256, a number beyond the range of a double; and malformed JSON with the parser's position.
nlohmann::json parse_input_json(std::string_view text, const std::string& file);

}  // namespace twin
