// JsonReader: type and range checks on user JSON, with JSON Pointer paths (RFC 6901 escaping) in errors,
// and the "did you mean" suggestion for misspelt keys (Levenshtein distance).
#include "core/json_reader.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace twin {

namespace {

std::string escape_pointer_token(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

std::string truncated(std::string text) {
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}

}  // namespace

std::optional<std::string> closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::numeric_limits<std::size_t>::max();
  for (const std::string& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = candidate;
    }
  }
  // Close enough to be a typo: a third of the name, at least 2 edits.
  const std::size_t allowed = std::max<std::size_t>(2, word.size() / 3);
  if (!best || best_distance > allowed) return std::nullopt;
  return best;
}

std::string join_names(const std::vector<std::string>& names) { return fmt::format("{}", fmt::join(names, ", ")); }

JsonReader::JsonReader(const nlohmann::json& value, const std::string& file, std::string path)
    : value_(&value), file_(&file), path_(std::move(path)) {}

void JsonReader::fail(std::string_view expected) const {
  const std::string_view lead = expected.starts_with("expected ") ? "" : "expected ";  // "expected X, got Y" always
  throw InputError(file(), path_, fmt::format("{}{}, got {}", lead, expected, describe_value()));
}

void JsonReader::fail_plain(std::string_view message) const { throw InputError(file(), path_, std::string(message)); }

std::string JsonReader::describe_value() const {
  switch (value_->type()) {
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "an array";
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::string: return truncated(value_->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    case nlohmann::json::value_t::boolean:
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float:
    case nlohmann::json::value_t::binary:
    case nlohmann::json::value_t::discarded: return truncated(value_->dump());
  }
  return truncated(value_->dump());
}

void JsonReader::expect_object() const {
  if (!value_->is_object()) fail("expected an object");
}

void JsonReader::only_keys(std::initializer_list<std::string_view> known) const {
  expect_object();
  const std::vector<std::string> names(known.begin(), known.end());
  for (const auto& item : value_->items()) {
    if (std::find(names.begin(), names.end(), item.key()) != names.end()) continue;
    const std::string shown = truncated(item.key());
    std::string message = fmt::format("unknown key '{}'", shown);
    const auto suggestion = shown == item.key() ? closest_name(item.key(), names) : std::nullopt;
    if (suggestion) message += fmt::format(" (did you mean '{}'?)", *suggestion);
    else message += fmt::format(" (expected one of: {})", join_names(names));
    throw InputError(file(), path_ + "/" + escape_pointer_token(shown), message);
  }
}

std::optional<JsonReader> JsonReader::find(std::string_view key) const {
  expect_object();
  auto it = value_->find(key);
  if (it == value_->end() || it->is_null()) return std::nullopt;
  return JsonReader(*it, file(), path_ + "/" + escape_pointer_token(key));
}

JsonReader JsonReader::required(std::string_view key) const {
  if (auto found = find(key)) return *found;
  fail_plain(fmt::format("missing required key '{}'", key));
}

std::vector<JsonReader> JsonReader::elements() const {
  if (!value_->is_array()) fail("expected an array");
  std::vector<JsonReader> out;
  for (std::size_t i = 0; i < value_->size(); ++i)
    out.emplace_back((*value_)[i], file(), path_ + "/" + std::to_string(i));
  return out;
}

std::vector<JsonReader> JsonReader::non_empty_elements() const {
  if (!value_->is_array() || value_->empty()) fail("expected a non-empty array");
  return elements();
}

std::int64_t JsonReader::integer(std::int64_t min, std::int64_t max) const {
  const std::string expectation = min == 1 ? fmt::format("expected a positive integer (at most {})", max)
                                           : fmt::format("expected an integer in [{}, {}]", min, max);
  std::int64_t result = 0;
  if (value_->is_number_unsigned()) {
    const auto unsigned_value = value_->get<std::uint64_t>();
    if (unsigned_value > static_cast<std::uint64_t>(max)) fail(expectation);
    result = static_cast<std::int64_t>(unsigned_value);
  } else if (value_->is_number_integer()) {
    result = value_->get<std::int64_t>();
  } else {
    fail(expectation);
  }
  if (result < min || result > max) fail(expectation);
  return result;
}

int JsonReader::positive_int() const {
  return static_cast<int>(integer(1, std::numeric_limits<int>::max()));
}

std::int64_t JsonReader::positive_int64() const { return integer(1, std::int64_t{1} << 53); }

double JsonReader::number(double min, double max, std::string_view expectation) const {
  if (!value_->is_number()) fail(expectation);
  const double result = value_->get<double>();
  if (!std::isfinite(result) || result < min || result > max) fail(expectation);
  return result;
}

double JsonReader::positive_number() const {
  const double result = number(0, std::numeric_limits<double>::max(), "expected a positive number");
  if (result <= 0) fail("expected a positive number");
  return result;
}

bool JsonReader::boolean() const {
  if (!value_->is_boolean()) fail("expected true or false");
  return value_->get<bool>();
}

std::string JsonReader::string() const {
  if (!value_->is_string() || value_->get_ref<const std::string&>().empty()) fail("expected a non-empty string");
  return value_->get<std::string>();
}

std::string JsonReader::one_of(const std::vector<std::string>& names, std::string_view what) const {
  if (value_->is_string()) {
    const auto& text = value_->get_ref<const std::string&>();
    if (std::find(names.begin(), names.end(), text) != names.end()) return text;
  }
  fail(fmt::format("expected a {}: one of {}", what, join_names(names)));
}

std::optional<JsonReader> preset_field(const JsonReader& r, std::string_view key, bool has_preset) {
  if (auto found = r.find(key)) return found;
  if (!has_preset) r.fail_plain(fmt::format("missing required key '{}' (or give a \"preset\")", key));
  return std::nullopt;
}

nlohmann::json read_json_file(const std::string& path, std::string_view readable) {
  return parse_input_json(read_input_file(path, readable), path);
}

}  // namespace twin
