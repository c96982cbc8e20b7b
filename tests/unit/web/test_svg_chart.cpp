// The report's SVG charts (svg_chart.h, report_charts.h) and the shared Prometheus family writer:
// what is drawn is counted in the output text (one "x,y" pair per point, one <rect class="bar">
// per bucket), ticks are 1-2-5 steps, text is escaped. XML well-formedness is checked by
// tests/integration/test_web.py (Python's xml.etree) on a real run's files.
//   ctest --test-dir build -R web
#include <gtest/gtest.h>

#include <string>

#include "web/prometheus_family.h"
#include "web/report_charts.h"
#include "web/svg_chart.h"

namespace meshrl::web {
namespace {

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// The "x,y" pairs of the first polyline named `name`.
size_t points_of(const std::string& svg, const std::string& name) {
  const size_t at = svg.find("data-name=\"" + name + "\"");
  if (at == std::string::npos) return 0;
  const size_t from = svg.find("points=\"", at) + 8, to = svg.find('"', from);
  return count(svg.substr(from, to - from), ",");
}

TEST(SvgChart, NiceTicksAreOneTwoFiveSteps) {
  const std::vector<double> unit = nice_ticks(0, 1, 5);
  ASSERT_EQ(unit.size(), 6u);
  for (size_t i = 0; i < unit.size(); ++i) EXPECT_NEAR(unit[i], 0.2 * static_cast<double>(i), 1e-12);
  EXPECT_EQ(nice_ticks(0, 100, 5), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(-0.3, 0.9, 5), (std::vector<double>{-0.5, 0, 0.5, 1}));  // 1.2 / 5 = 0.24 -> step 0.5
  EXPECT_EQ(nice_ticks(1, 4, 8, /*integer=*/true), (std::vector<double>{1, 2, 3, 4}));
  // One value: a window around it (2.7..3.3), whole steps on an integer axis.
  EXPECT_EQ(nice_ticks(3, 3, 5, true), (std::vector<double>{2, 3, 4}));
}

TEST(SvgChart, LineChartDrawsEveryPointAndEscapesText) {
  SvgLineChart c;
  c.title = "reward <&> \"x\"";
  c.series = {{"a", {1, 2, 3, 4}, {0.1, 0.4, 0.2, 0.9}, "#000"}, {"b", {1, 2}, {1, 2}, "#f00"}};
  const std::string svg = svg_line_chart(c);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("reward &lt;&amp;&gt; &quot;x&quot;"), std::string::npos);
  EXPECT_EQ(points_of(svg, "a"), 4u);
  EXPECT_EQ(points_of(svg, "b"), 2u);
  EXPECT_EQ(count(svg, "<circle"), 6u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
}

TEST(SvgChart, LogAxisLeavesOutWhatItCannotDraw) {
  SvgLineChart c;
  c.log_y = true;
  c.series = {{"bytes", {1, 2, 3}, {0, 1e3, 1e6}, "#000"}};
  const std::string svg = svg_line_chart(c);
  EXPECT_EQ(points_of(svg, "bytes"), 2u);
  SvgLineChart empty;
  empty.empty_note = "nothing here";
  EXPECT_NE(svg_line_chart(empty).find("nothing here"), std::string::npos);
  EXPECT_EQ(count(svg_line_chart(empty), "<polyline"), 0u);
}

TEST(SvgChart, BarChartHasABarPerLabel) {
  SvgBarChart b;
  b.labels = {"<=0", "<=1", ">1"};
  b.values = {5, 0, 2};
  const std::string svg = svg_bar_chart(b);
  EXPECT_EQ(count(svg, "<rect class=\"bar\""), 3u);
  EXPECT_NE(svg.find("data-label=\"&lt;=0\" data-value=\"5\""), std::string::npos);
}

TEST(ReportCharts, OnePointPerCommittedVersionAndEvalsWhereTheyAre) {
  RunSnapshot s;
  for (int64_t v = 0; v <= 3; ++v) {
    VersionPoint p;
    p.version = v;
    p.reward_mean = 0.1 * static_cast<double>(v);
    p.bytes_up = p.bytes_down = 1000.0 * static_cast<double>(v + 1);
    p.bytes_dataparallel = 1e6 * static_cast<double>(v);
    if (v == 0 || v == 3) p.pass_at_1 = 0.25;
    s.versions.push_back(p);
  }
  s.staleness_le = {0, 1, 2};
  s.staleness_bucket_counts = {4, 1, 0, 0};
  const auto charts = report_charts(s);
  ASSERT_EQ(charts.size(), 4u);
  EXPECT_EQ(charts[0].key, "reward");
  EXPECT_EQ(points_of(charts[0].svg, "reward"), 3u);  // versions 1..3; version 0 is the start
  EXPECT_EQ(points_of(charts[1].svg, "pass@1 %"), 2u);
  EXPECT_EQ(points_of(charts[2].svg, "mesh (up + down)"), 3u);
  EXPECT_EQ(points_of(charts[2].svg, "data-parallel fp32"), 3u);
  EXPECT_EQ(count(charts[3].svg, "<rect class=\"bar\""), 4u);
  EXPECT_NE(charts[3].svg.find("data-label=\"&gt;2\""), std::string::npos);
}

TEST(PrometheusFamily, HistogramIsCumulativeWithLabelsOnEveryLine) {
  std::string out;
  PrometheusFamily f(out, "x_seconds", "histogram", "help");
  f.histogram({0.5, 1}, {2, 0, 1}, 3.25, {"node", "paris"});
  EXPECT_EQ(out,
            "# HELP x_seconds help\n# TYPE x_seconds histogram\n"
            "x_seconds_bucket{node=\"paris\",le=\"0.5\"} 2\n"
            "x_seconds_bucket{node=\"paris\",le=\"1\"} 2\n"
            "x_seconds_bucket{node=\"paris\",le=\"+Inf\"} 3\n"
            "x_seconds_sum{node=\"paris\"} 3.25\n"
            "x_seconds_count{node=\"paris\"} 3\n");
}

}  // namespace
}  // namespace meshrl::web
