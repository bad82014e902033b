// Number and text formatting shared by the CSV and HTML reports: fixed decimals, never locale- or
// platform-dependent, so that the same candidates always give the same bytes.
#pragma once
#include <string>
#include <string_view>

#include "core/text_format.hpp"  // fixed()
#include "core/units.hpp"

namespace twin {

// `value` rounded to an integer, with commas between thousands ("1,234,568"), for readers.
std::string grouped(double value);
// Integer nanoseconds as seconds with all 9 decimals, exact ("1.234567891").
std::string seconds_text(TimeNs ns);
// Integer nanoseconds as milliseconds with 3 decimals ("1234.568").
std::string milliseconds_text(TimeNs ns);
// Bytes as GiB with `decimals` digits.
std::string gib_text(Bytes bytes, int decimals);
// Labels for readers: seconds with 3 decimals ("1.235 s"), a fraction as a percentage with 1 ("12.3%"), bytes as
// GB (10^9 bytes) with 2 ("1.23 GB").
std::string seconds_label(TimeNs ns);
std::string percent_label(double fraction);
std::string gigabytes_label(Bytes bytes);
// Escapes & < > " ' for HTML text and attribute values (SVG included).
std::string escape_html(std::string_view text);

}  // namespace twin
