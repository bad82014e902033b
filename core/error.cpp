// Formats an InputError as "FILE: at JSON_PATH: EXPECTED".
#include "core/error.hpp"

namespace twin {

static std::string format_input_error(const std::string& file, const std::string& json_path,
                                      const std::string& expected) {
  std::string where = json_path.empty() ? std::string() : " at " + json_path + ":";
  return file + ":" + where + " " + expected;
}

InputError::InputError(std::string file, std::string json_path, std::string expected)
    : std::runtime_error(format_input_error(file, json_path, expected)),
      file_(std::move(file)),
      json_path_(std::move(json_path)),
      expected_(std::move(expected)) {}

}  // namespace twin
