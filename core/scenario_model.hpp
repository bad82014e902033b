#pragma once
#include "core/json_reader.hpp"
#include "core/model.hpp"

namespace twin {

// The scenario's `model` section: a preset or a Hugging Face config fills absent fields, explicit fields win; the
// first bad value throws with its JSON path and what was expected.
ModelConfig parse_model(const JsonReader& r);

}  // namespace twin
