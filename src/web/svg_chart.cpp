#include "web/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace meshrl::web {

namespace {

// The canvas: title and legend above the plot, tick labels and the x label below it.
constexpr double kWidth = 640, kHeight = 320;
constexpr double kLeft = 76, kRight = 16, kTop = 52, kBottom = 48;
constexpr double kPlotW = kWidth - kLeft - kRight, kPlotH = kHeight - kTop - kBottom;

std::string f1(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", x);
  return b;
}

std::string default_tick(double v) {
  if (std::abs(v) < 1e-12) return "0";
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", v);
  return b;
}

std::string text(double x, double y, const std::string& s, const char* anchor, int size = 11, const std::string& extra = "") {
  return "<text x=\"" + f1(x) + "\" y=\"" + f1(y) + "\" text-anchor=\"" + anchor + "\" font-size=\"" + std::to_string(size) + "\"" +
         extra + ">" + svg_escape(s) + "</text>\n";
}

std::string line(double x1, double y1, double x2, double y2, const char* stroke) {
  return "<line x1=\"" + f1(x1) + "\" y1=\"" + f1(y1) + "\" x2=\"" + f1(x2) + "\" y2=\"" + f1(y2) + "\" stroke=\"" + stroke + "\"/>\n";
}

std::string open_svg(const std::string& title) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
         "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + f1(kWidth) + "\" height=\"" + f1(kHeight) +
         "\" viewBox=\"0 0 " + f1(kWidth) + " " + f1(kHeight) + "\" font-family=\"sans-serif\">\n"
         "<title>" + svg_escape(title) + "</title>\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n" +
         text(kWidth / 2, 20, title, "middle", 14, " font-weight=\"bold\"");
}

// Axis lines and the two axis labels.
std::string frame(const std::string& x_label, const std::string& y_label) {
  std::string s = line(kLeft, kTop + kPlotH, kLeft + kPlotW, kTop + kPlotH, "#333333");
  s += line(kLeft, kTop, kLeft, kTop + kPlotH, "#333333");
  s += text(kLeft + kPlotW / 2, kHeight - 8, x_label, "middle", 12);
  s += text(16, kTop + kPlotH / 2, y_label, "middle", 12, " transform=\"rotate(-90 16 " + f1(kTop + kPlotH / 2) + ")\"");
  return s;
}

// y grid lines and tick labels; to_px maps a tick value to its pixel row.
std::string y_ticks(const std::vector<double>& ticks, const std::function<double(double)>& to_px,
                    const std::function<std::string(double)>& label) {
  std::string s;
  for (double t : ticks) {
    const double y = to_px(t);
    s += line(kLeft, y, kLeft + kPlotW, y, "#e5e7eb");
    s += text(kLeft - 6, y + 4, label(t), "end");
  }
  return s;
}

}  // namespace

std::string svg_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '&') out += "&amp;";
    else if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!(hi > lo)) {  // one value (or none): a unit-wide window around it
    const double pad = std::abs(lo) > 0 ? std::abs(lo) * 0.1 : 1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  if (integer) step = std::max(1.0, std::round(step));
  std::vector<double> t;
  // Multiples of the step (k * step, not a running sum, so 0.6 stays 3 x 0.2).
  const auto k0 = static_cast<int64_t>(std::floor(lo / step + 1e-9)), k1 = static_cast<int64_t>(std::ceil(hi / step - 1e-9));
  for (int64_t k = k0; k <= k1 && t.size() < 100; ++k) t.push_back(static_cast<double>(k) * step);
  if (t.size() < 2) t.push_back(static_cast<double>(k0 + 1) * step);
  return t;
}

std::string svg_line_chart(const SvgLineChart& c) {
  // What can be drawn: finite points, and on a log axis only y > 0.
  std::vector<SvgSeries> drawn;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const SvgSeries& s : c.series) {
    SvgSeries d{s.name, {}, {}, s.color};
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i]) || (c.log_y && s.y[i] <= 0)) continue;
      d.x.push_back(s.x[i]);
      d.y.push_back(s.y[i]);
      xlo = std::min(xlo, s.x[i]);
      xhi = std::max(xhi, s.x[i]);
      ylo = std::min(ylo, s.y[i]);
      yhi = std::max(yhi, s.y[i]);
    }
    drawn.push_back(std::move(d));
  }
  std::string svg = open_svg(c.title);
  svg += frame(c.x_label, c.y_label);
  if (xlo > xhi) {  // nothing to draw
    svg += text(kLeft + kPlotW / 2, kTop + kPlotH / 2, c.empty_note, "middle", 13, " fill=\"#6b7280\"");
    return svg + "</svg>\n";
  }
  if (c.y_min) ylo = std::min(ylo, *c.y_min);
  if (c.y_max) yhi = std::max(yhi, *c.y_max);

  const std::vector<double> xt = nice_ticks(xlo, xhi, 8, c.integer_x);
  const double x0 = xt.front(), x1 = xt.back();
  // Inset from both ends so the first and last markers are not cut by the frame.
  constexpr double kInset = 10;
  const auto px = [&](double x) { return kLeft + kInset + (x - x0) / (x1 - x0) * (kPlotW - 2 * kInset); };
  std::vector<double> yt;
  std::function<double(double)> py;
  const auto label = c.y_tick ? c.y_tick : std::function<std::string(double)>(default_tick);
  if (c.log_y) {
    const double e0 = std::floor(std::log10(ylo)), e1 = std::max(e0 + 1, std::ceil(std::log10(yhi)));
    for (double e = e0; e <= e1; ++e) yt.push_back(std::pow(10.0, e));
    py = [=](double y) { return kTop + kPlotH - (std::log10(y) - e0) / (e1 - e0) * kPlotH; };
  } else {
    yt = nice_ticks(ylo, yhi, 5);
    const double y0 = yt.front(), y1 = yt.back();
    py = [=](double y) { return kTop + kPlotH - (y - y0) / (y1 - y0) * kPlotH; };
  }
  svg += y_ticks(yt, py, label);
  for (double t : xt) {
    svg += line(px(t), kTop + kPlotH, px(t), kTop + kPlotH + 4, "#333333");
    svg += text(px(t), kTop + kPlotH + 17, default_tick(t), "middle");
  }
  double legend_x = kLeft;
  for (const SvgSeries& s : drawn) {
    svg += "<polyline class=\"series\" data-name=\"" + svg_escape(s.name) + "\" fill=\"none\" stroke=\"" + s.color +
           "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < s.x.size(); ++i) svg += (i ? " " : "") + f1(px(s.x[i])) + "," + f1(py(s.y[i]));
    svg += "\"/>\n";
    for (size_t i = 0; i < s.x.size(); ++i)
      svg += "<circle cx=\"" + f1(px(s.x[i])) + "\" cy=\"" + f1(py(s.y[i])) + "\" r=\"2.5\" fill=\"" + s.color + "\"/>\n";
    svg += "<rect x=\"" + f1(legend_x) + "\" y=\"32\" width=\"10\" height=\"10\" fill=\"" + s.color + "\"/>\n";
    svg += text(legend_x + 14, 41, s.name, "start");
    legend_x += 24 + 7.0 * static_cast<double>(s.name.size());
  }
  return svg + "</svg>\n";
}

std::string svg_bar_chart(const SvgBarChart& c) {
  std::string svg = open_svg(c.title);
  svg += frame(c.x_label, c.y_label);
  const size_t n = std::min(c.labels.size(), c.values.size());
  double vmax = 0;
  for (size_t i = 0; i < n; ++i) vmax = std::max(vmax, c.values[i]);
  const std::vector<double> yt = nice_ticks(0, vmax > 0 ? vmax : 1, 5);
  const double y1 = yt.back();
  const auto py = [&](double y) { return kTop + kPlotH - y / y1 * kPlotH; };
  svg += y_ticks(yt, py, default_tick);
  const double slot = n > 0 ? kPlotW / static_cast<double>(n) : kPlotW;
  for (size_t i = 0; i < n; ++i) {
    const double v = std::max(0.0, c.values[i]);
    const double x = kLeft + slot * (static_cast<double>(i) + 0.2), w = slot * 0.6;
    svg += "<rect class=\"bar\" data-label=\"" + svg_escape(c.labels[i]) + "\" data-value=\"" + default_tick(v) + "\" x=\"" + f1(x) +
           "\" y=\"" + f1(py(v)) + "\" width=\"" + f1(w) + "\" height=\"" + f1(kTop + kPlotH - py(v)) + "\" fill=\"" + c.color + "\"/>\n";
    svg += text(x + w / 2, py(v) - 4, default_tick(v), "middle", 10);
    svg += text(x + w / 2, kTop + kPlotH + 17, c.labels[i], "middle");
  }
  return svg + "</svg>\n";
}

}  // namespace meshrl::web
