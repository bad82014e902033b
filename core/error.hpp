// The one error type for bad input: it names the file, the JSON path and what was expected,
// so that every command can print a single clear line and exit non-zero.
#pragma once
#include <stdexcept>
#include <string>

namespace twin {

class InputError : public std::runtime_error {
 public:
  // Each part longer than this is cut (a megabyte key in the input must not become a megabyte message).
  static constexpr std::size_t kMaxFileChars = 400, kMaxPathChars = 200, kMaxExpectedChars = 800;

  // json_path is a JSON Pointer ("/model/num_layers"); empty when the whole file is at fault.
  InputError(std::string file, std::string json_path, std::string expected);

  const std::string& file() const { return file_; }
  const std::string& json_path() const { return json_path_; }
  const std::string& expected() const { return expected_; }

 private:
  std::string file_;
  std::string json_path_;
  std::string expected_;
};

}  // namespace twin
