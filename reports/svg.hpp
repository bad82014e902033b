// A minimal inline-SVG writer for the HTML report: rects, lines, text, tooltips. Coordinates print with
// one decimal and every string is escaped, so charts are deterministic bytes and safe to embed.
#pragma once
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace twin {

class Svg {
 public:
  // `label` becomes the chart's accessible name (aria-label).
  Svg(double width, double height, std::string_view label);

  void rect(double x, double y, double width, double height, std::string_view fill, std::string_view tooltip = {});
  void line(double x1, double y1, double x2, double y2, std::string_view stroke, double stroke_width = 1,
            bool dashed = false);
  // anchor: "start", "middle" or "end".
  void text(double x, double y, std::string_view content, std::string_view anchor = "start", int size_px = 11,
            std::string_view fill = "#333");
  // `fill` "none" draws the outline only; `row` >= 0 adds data-row="row" (the report's script names the point).
  void circle(double x, double y, double radius, std::string_view fill, std::string_view stroke, long row = -1);
  // An open polyline through `points` (x, y pairs).
  void polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double stroke_width,
                bool dashed = false);
  // A closed polygon (markers: a cross, a triangle), outlined when `fill` is "none".
  void polygon(const std::vector<std::pair<double, double>>& points, std::string_view fill, std::string_view stroke,
               long row = -1);
  // The report's script measures what the chart draws and fits the viewBox to it (data-fit), so that labels
  // of any length are neither clipped nor given room they do not use.
  void fit_to_content() { fit_ = true; }
  // Number of shapes written so far (the report caps it to keep files small).
  std::size_t elements() const { return elements_; }
  // The closed <svg> element.
  std::string str() const;

 private:
  double width_, height_;
  std::string label_;
  std::string body_;
  std::size_t elements_ = 0;
  bool fit_ = false;
};

// Round axis steps (1, 2 or 5 times a power of ten) giving about `target` ticks from 0 to `max_value`.
std::vector<double> nice_ticks(double max_value, int target);
// The same steps over [low, high]: the first tick at or below `low`, the last at or above `high`.
std::vector<double> nice_ticks(double low, double high, int target);
// Decimals needed to print the ticks of `step` distinctly.
int tick_decimals(double step);

}  // namespace twin
