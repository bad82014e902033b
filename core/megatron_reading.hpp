// What the readers of a Megatron-LM command line share (core/megatron_scenario.cpp, core/megatron_model_reading.cpp):
// the scenario document being written with the flag behind each field, the arguments and the base scenario being
// read, and the refusal that names a flag. Internal to those two files.
#pragma once
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/megatron_flags.hpp"
#include "core/scenario.hpp"

namespace twin::megatron_reading {

using nlohmann::json;

[[noreturn]] inline void refuse(const std::string& source, const std::string& flag, const std::string& what) {
  throw InputError(source, "", fmt::format("{}: {}", flag, what));
}

// The scenario document being written, and which flag set each field (to tell a parse error as that flag).
class Document {
 public:
  void set(const std::string& pointer, json value, const std::string& flag) {
    json_[json::json_pointer(pointer)] = std::move(value);
    flag_of_[pointer] = flag;
  }
  json& root() { return json_; }
  // The flag behind `pointer`, or behind the object holding it; "" when none set it.
  std::string flag_of(std::string pointer) const {
    for (;;) {
      if (auto it = flag_of_.find(pointer); it != flag_of_.end()) return it->second;
      const std::size_t slash = pointer.rfind('/');
      if (slash == std::string::npos || slash == 0) return "";
      pointer.resize(slash);
    }
  }

 private:
  json json_ = json::object();
  std::map<std::string, std::string> flag_of_;
};

struct Reading {
  const MegatronArguments& a;
  const Scenario& base;
  const std::string& source;
  Document doc;
  std::vector<std::string> not_modelled;

  long long required(const char* flag) const {
    if (!a.has(flag)) refuse(source, flag, "expected it: Megatron has no default for it");
    return a.integer(flag, 0);
  }
  void note(const std::string& text) { not_modelled.push_back(text); }
};

inline std::string given(const MegatronArgument& argument) {
  std::string text = argument.flag;
  for (const std::string& value : argument.values) text += " " + value;
  return text;
}

// The model section from the flags: widths, heads, norm, activation, positions, biases (read_model); the 2025-26
// variants (read_model_variants); experts and their router (read_moe).
void read_model(Reading& r);
void read_model_variants(Reading& r);
void read_moe(Reading& r);

}  // namespace twin::megatron_reading
