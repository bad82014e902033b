// The Hugging Face config.json files the HF reader tests read (tests/core/fixtures/hf/), as twin reads any input file.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "core/input_file.hpp"

namespace twin::testing {

inline const std::filesystem::path kHfFixtures = std::filesystem::path(TWIN_SOURCE_DIR) / "tests/core/fixtures/hf";

inline nlohmann::json hf_fixture(const std::string& file) {
  const std::filesystem::path path = kHfFixtures / file;
  return parse_input_json(read_input_file(path, "a fixture"), path.string());
}

}  // namespace twin::testing
