// fmt formats doubles with the shortest exact algorithm, independent of the C locale.
#include "reports/format.hpp"

#include <algorithm>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace twin {

std::string grouped(double value) {
  const std::string digits = fixed(value, 0);
  const std::size_t first_digit = digits.front() == '-' ? 1 : 0;
  std::string out = digits.substr(0, first_digit);
  for (std::size_t i = first_digit; i < digits.size(); ++i) {
    if (i > first_digit && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string seconds_text(TimeNs ns) {
  const char* sign = ns < 0 ? "-" : "";
  const TimeNs magnitude = std::llabs(ns);
  return fmt::format("{}{}.{:09}", sign, magnitude / kNsPerS, magnitude % kNsPerS);
}

std::string milliseconds_text(TimeNs ns) { return fixed(static_cast<double>(ns) / kNsPerMs, 3); }

std::string seconds_label(TimeNs ns) { return fixed(to_seconds(ns), 3) + " s"; }

std::string percent_label(double fraction) { return fixed(100.0 * fraction, 1) + "%"; }

std::string gigabytes_label(Bytes bytes) { return fixed(static_cast<double>(bytes) / 1e9, 2) + " GB"; }

std::string gib_text(Bytes bytes, int decimals) { return fixed(static_cast<double>(bytes) / kGiB, decimals); }

std::string escape_html(std::string_view text) {
  std::string escaped;
  escaped.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': escaped += "&amp;"; break;
      case '<': escaped += "&lt;"; break;
      case '>': escaped += "&gt;"; break;
      case '"': escaped += "&quot;"; break;
      case '\'': escaped += "&#39;"; break;
      default: escaped += c;
    }
  }
  return escaped;
}

}  // namespace twin
