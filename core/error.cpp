// Formats an InputError as "FILE: at JSON_PATH: EXPECTED", each part escaped to one line and cut to a readable
// length: a key or value of megabytes in the input must not become a message of megabytes. Escaping happens
// before std::runtime_error copies the text, because its what() is a C string: a NUL would end it there.
#include "core/error.hpp"
#include "core/error_line.hpp"

#include <fmt/format.h>

namespace twin {

namespace {

std::string shortened(std::string text, std::size_t limit) {
  if (text.size() <= limit) return text;
  text.resize(limit);
  return text + "...";
}

std::string message_part(std::string text, std::size_t limit) { return shortened(printable_line(text), limit); }

std::string format_input_error(const std::string& file, const std::string& json_path, const std::string& expected) {
  std::string where = json_path.empty() ? std::string() : " at " + json_path + ":";
  return file + ":" + where + " " + expected;
}

}  // namespace

std::string printable_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (byte < 0x20 || byte == 0x7f) out += fmt::format("\\x{:02x}", byte);
    else out += c;
  }
  return out;
}

std::string error_line(const std::exception& error) {
  const std::string line = printable_line(error.what());
  return line.empty() ? "an error without a message (a bug: please report the command that gave it)" : line;
}

InputError::InputError(std::string file, std::string json_path, std::string expected)
    : std::runtime_error(format_input_error(message_part(file, kMaxFileChars), message_part(json_path, kMaxPathChars),
                                            message_part(expected, kMaxExpectedChars))),
      file_(message_part(std::move(file), kMaxFileChars)),
      json_path_(message_part(std::move(json_path), kMaxPathChars)),
      expected_(message_part(std::move(expected), kMaxExpectedChars)) {}

}  // namespace twin
