// For tests of scenario sections: the JSON path of the error parse_scenario raises ("(no error)" when it parses),
// its whole message in `message`.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/scenario.hpp"

namespace twin::testing {

inline std::string error_path(const nlohmann::json& document, std::string& message) {
  try {
    parse_scenario(document, "s.json");
  } catch (const InputError& e) {
    message = e.what();
    return e.json_path();
  }
  return "(no error)";
}

}  // namespace twin::testing
