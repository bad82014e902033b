// One decimal is a tenth of a pixel: finer coordinates would only grow the file.
#include "reports/svg.hpp"

#include <algorithm>
#include <cmath>

#include "reports/format.hpp"

namespace twin {

Svg::Svg(double width, double height, std::string_view label) : width_(width), height_(height), label_(label) {}

void Svg::rect(double x, double y, double width, double height, std::string_view fill, std::string_view tooltip) {
  body_ += "<rect x=\"" + fixed(x, 1) + "\" y=\"" + fixed(y, 1) + "\" width=\"" + fixed(width, 1) + "\" height=\"" +
           fixed(height, 1) + "\" fill=\"" + escape_html(fill) + "\"";
  if (tooltip.empty()) {
    body_ += "/>";
  } else {
    body_ += "><title>" + escape_html(tooltip) + "</title></rect>";
  }
  body_ += '\n';
  ++elements_;
}

void Svg::line(double x1, double y1, double x2, double y2, std::string_view stroke, double stroke_width, bool dashed) {
  body_ += "<line x1=\"" + fixed(x1, 1) + "\" y1=\"" + fixed(y1, 1) + "\" x2=\"" + fixed(x2, 1) + "\" y2=\"" +
           fixed(y2, 1) + "\" stroke=\"" + escape_html(stroke) + "\" stroke-width=\"" + fixed(stroke_width, 1) + "\"" +
           (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
  ++elements_;
}

void Svg::text(double x, double y, std::string_view content, std::string_view anchor, int size_px,
               std::string_view fill) {
  body_ += "<text x=\"" + fixed(x, 1) + "\" y=\"" + fixed(y, 1) + "\" text-anchor=\"" + escape_html(anchor) +
           "\" font-size=\"" + std::to_string(size_px) + "\" fill=\"" + escape_html(fill) + "\">" +
           escape_html(content) + "</text>\n";
  ++elements_;
}

namespace {

std::string points_text(const std::vector<std::pair<double, double>>& points) {
  std::string text;
  for (const auto& [x, y] : points) text += (text.empty() ? "" : " ") + fixed(x, 1) + "," + fixed(y, 1);
  return text;
}

std::string row_attribute(long row) { return row >= 0 ? " data-row=\"" + std::to_string(row) + "\"" : ""; }

}  // namespace

void Svg::circle(double x, double y, double radius, std::string_view fill, std::string_view stroke, long row) {
  body_ += "<circle cx=\"" + fixed(x, 1) + "\" cy=\"" + fixed(y, 1) + "\" r=\"" + fixed(radius, 1) + "\" fill=\"" +
           escape_html(fill) + "\" stroke=\"" + escape_html(stroke) + "\"" + row_attribute(row) + "/>\n";
  ++elements_;
}

void Svg::polyline(const std::vector<std::pair<double, double>>& points, std::string_view stroke, double stroke_width,
                   bool dashed) {
  body_ += "<polyline points=\"" + points_text(points) + "\" fill=\"none\" stroke=\"" + escape_html(stroke) +
           "\" stroke-width=\"" + fixed(stroke_width, 1) + "\"" + (dashed ? " stroke-dasharray=\"4 3\"" : "") + "/>\n";
  ++elements_;
}

void Svg::polygon(const std::vector<std::pair<double, double>>& points, std::string_view fill, std::string_view stroke,
                  long row) {
  body_ += "<polygon points=\"" + points_text(points) + "\" fill=\"" + escape_html(fill) + "\" stroke=\"" +
           escape_html(stroke) + "\"" + row_attribute(row) + "/>\n";
  ++elements_;
}

std::string Svg::str() const {
  // Inline SVG in HTML needs no xmlns, and leaving it out keeps the report free of any URL.
  return "<svg role=\"img\"" + std::string(fit_ ? " data-fit=\"\"" : "") + " aria-label=\"" + escape_html(label_) +
         "\" width=\"" + fixed(width_, 0) + "\" height=\"" +
         fixed(height_, 0) + "\" viewBox=\"0 0 " + fixed(width_, 0) + " " + fixed(height_, 0) + "\">\n" + body_ +
         "</svg>";
}

std::vector<double> nice_ticks(double max_value, int target) {
  if (!(max_value > 0) || target < 1) return {0.0};
  const double raw_step = max_value / target;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (step >= raw_step) break;
  }
  std::vector<double> ticks;
  for (int i = 0; i * step <= max_value * (1 + 1e-9); ++i) ticks.push_back(i * step);
  return ticks;
}

std::vector<double> nice_ticks(double low, double high, int target) {
  if (!(high > low) || target < 1) return {low};
  const std::vector<double> span = nice_ticks(high - low, target);
  const double step = span.size() > 1 ? span[1] : high - low;
  const double first = std::floor(low / step) * step;
  const int steps = std::max(1, static_cast<int>(std::ceil((high - first) / step - 1e-9)));
  std::vector<double> ticks;
  for (int i = 0; i <= steps; ++i) ticks.push_back(first + i * step);
  return ticks;
}

int tick_decimals(double step) {
  if (!(step > 0) || step >= 1) return 0;
  return static_cast<int>(std::ceil(-std::log10(step) - 1e-9));
}

}  // namespace twin
