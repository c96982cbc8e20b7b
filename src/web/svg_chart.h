// Small standalone SVG charts (SVG 1.1, no scripts, no external files): a line chart of one or
// more series over x and a bar chart, each with a title, axes, ticks and a legend. Written by hand
// because Debian packages no C++ SVG chart library, and these need only lines, rectangles and text.
// Every series is one <polyline class="series" data-name="..."> with one "x,y" pair per data
// point, and every bar one <rect class="bar">, so tools and tests can count what was drawn.
// Knows nothing about runs (report_charts.h decides what to plot).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace meshrl::web {

struct SvgSeries {
  std::string name;
  std::vector<double> x, y;  // same length; the points in drawing order
  std::string color = "#2563eb";
};

struct SvgLineChart {
  std::string title, x_label, y_label;
  std::vector<SvgSeries> series;
  bool integer_x = true;                  // x ticks on whole numbers only (versions)
  bool log_y = false;                     // log10 y axis; points with y <= 0 cannot be drawn and are left out
  std::optional<double> y_min, y_max;     // a fixed y range (else the data's, rounded to ticks)
  std::function<std::string(double)> y_tick;  // tick text; default: up to 4 significant digits
  std::string empty_note = "no data";     // shown when no series has a point
};

struct SvgBarChart {
  std::string title, x_label, y_label;
  std::vector<std::string> labels;        // one per bar, under it
  std::vector<double> values;             // one per bar, >= 0
  std::string color = "#2563eb";
};

std::string svg_line_chart(const SvgLineChart& c);
std::string svg_bar_chart(const SvgBarChart& c);

// Tick positions covering [lo, hi] at a 1-2-5 step, about `target` of them (at least 2).
std::vector<double> nice_ticks(double lo, double hi, int target, bool integer = false);
// Text with &, <, >, " escaped for SVG content and attribute values.
std::string svg_escape(const std::string& s);

}  // namespace meshrl::web
