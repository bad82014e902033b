// The script report.html inlines (reports/report_script.js, embedded by the build): it fits each chart to its
// measured labels and draws the sortable, filterable ranking from the data the page embeds.
#pragma once
#include <string_view>

namespace twin {

std::string_view report_script();

}  // namespace twin
