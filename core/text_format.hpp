// Text primitives every output shares (CSV files, HTML reports, traces): fixed decimals that never depend
// on the locale, and RFC 4180 quoting, so that the same inputs always give the same bytes.
#pragma once
#include <string>
#include <string_view>

namespace twin {

// `value` with exactly `decimals` digits after the point ("0.4312"); -0 prints as 0.
std::string fixed(double value, int decimals);
// One CSV field, quoted when it holds a comma, a quote or a line break (quotes doubled).
std::string csv_field(std::string_view text);

}  // namespace twin
