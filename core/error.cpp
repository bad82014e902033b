// Formats an InputError as "FILE: at JSON_PATH: EXPECTED", each part cut to a readable length: a key or
// value of megabytes in the input must not become a message of megabytes.
#include "core/error.hpp"

namespace twin {

namespace {

std::string shortened(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  text.resize(limit);
  return text + "...";
}

std::string format_input_error(const std::string& file, const std::string& json_path, const std::string& expected) {
  std::string where = json_path.empty() ? std::string() : " at " + json_path + ":";
  return file + ":" + where + " " + expected;
}

}  // namespace

InputError::InputError(std::string file, std::string json_path, std::string expected)
    : std::runtime_error(format_input_error(shortened(file, kMaxFileChars), shortened(json_path, kMaxPathChars),
                                            shortened(expected, kMaxExpectedChars))),
      file_(shortened(std::move(file), kMaxFileChars)),
      json_path_(shortened(std::move(json_path), kMaxPathChars)),
      expected_(shortened(std::move(expected), kMaxExpectedChars)) {}

}  // namespace twin
