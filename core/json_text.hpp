// JSON text written straight to a string, byte for byte as nlohmann::json's dump() writes it, for outputs with a
// line per op (traces, best.json), where building a json value per op was most of the writing.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace twin {

// `text` as a JSON string. The texts written so are enum and op names (ASCII); one holding a quote, a backslash, a
// control character or a non-ASCII byte goes through dump(), invalid UTF-8 replaced as everywhere else.
inline void append_json_string(std::string& out, std::string_view text) {
  if (text.find_first_of("\"\\") != std::string_view::npos ||
      std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c & 0x80; })) {
    out += nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  out += text;
  out += '"';
}

}  // namespace twin
