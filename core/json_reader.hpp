// Reading user JSON with errors that name the file, the JSON Pointer path and what was expected.
// A JsonReader is a value plus where it was found; its accessors check type and range and throw InputError.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace twin {

// The name in `candidates` closest to `word` by edit distance, when close enough to be a likely typo.
std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates);
// "a, b, c" for messages.
std::string join_names(const std::vector<std::string>& names);

// The JSON document in the file at `path`. Throws InputError naming the file: "<readable>" when it cannot
// be opened, "valid JSON (<parser's message with its position>)" when it does not parse.
nlohmann::json read_json_file(const std::string& path, std::string_view readable);

class JsonReader;

// The field `key` of object `r` where a preset may fill it: absent is an error ("missing required key ... (or
// give a \"preset\")") only when there is no preset.
std::optional<JsonReader> preset_field(const JsonReader& r, std::string_view key, bool has_preset);

class JsonReader {
 public:
  JsonReader(const nlohmann::json& value, const std::string& file, std::string path = "");

  const nlohmann::json& value() const { return *value_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }

  // Objects. A key whose value is null counts as absent.
  void expect_object() const;
  void only_keys(std::initializer_list<std::string_view> known) const;  // unknown keys are typos
  std::optional<JsonReader> find(std::string_view key) const;
  JsonReader required(std::string_view key) const;                      // "missing required key"
  // Arrays.
  std::vector<JsonReader> elements() const;            // may be empty
  std::vector<JsonReader> non_empty_elements() const;  // "expected a non-empty array"

  // Scalars, each checked for type and range.
  std::int64_t integer(std::int64_t min, std::int64_t max) const;
  int positive_int() const;                // [1, 2^31-1]
  std::int64_t positive_int64() const;     // [1, 2^53]
  double number(double min, double max, std::string_view expectation) const;
  double positive_number() const;          // (0, +inf), finite
  bool boolean() const;
  std::string string() const;              // non-empty
  // One of `names` (exact spelling); the message lists them.
  std::string one_of(const std::vector<std::string>& names, std::string_view what) const;

  // Throws InputError at this path: "<expected>, got <value>".
  [[noreturn]] void fail(std::string_view expected) const;
  // Throws InputError at this path with `message` as is.
  [[noreturn]] void fail_plain(std::string_view message) const;
  // A short rendering of the value for messages ("\"abc\"", "-3", "an object").
  std::string describe_value() const;

 private:
  const nlohmann::json* value_;
  const std::string* file_;
  std::string path_;
};

}  // namespace twin
