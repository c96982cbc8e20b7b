#include "web/report_charts.h"

#include <cstdio>

#include "web/svg_chart.h"

namespace meshrl::web {

namespace {

std::string megabytes(double bytes) {
  char b[32];
  std::snprintf(b, sizeof b, bytes >= 1e7 || bytes == 0 ? "%.0f MB" : "%.2g MB", bytes / 1e6);
  return b;
}

// "<=0", "<=1", ..., ">10": the staleness buckets as the dashboard labels them.
std::vector<std::string> staleness_labels(const std::vector<double>& le) {
  std::vector<std::string> out;
  char b[32];
  for (double x : le) {
    std::snprintf(b, sizeof b, "<=%g", x);
    out.push_back(b);
  }
  if (!le.empty()) {
    std::snprintf(b, sizeof b, ">%g", le.back());
    out.push_back(b);
  }
  return out;
}

}  // namespace

std::vector<ReportChart> report_charts(const RunSnapshot& s) {
  SvgSeries reward{"reward", {}, {}, "#2563eb"}, pass{"pass@1 %", {}, {}, "#2563eb"};
  SvgSeries mesh_bytes{"mesh (up + down)", {}, {}, "#2563eb"}, dp_bytes{"data-parallel fp32", {}, {}, "#dc2626"};
  for (const VersionPoint& p : s.versions) {
    const auto v = static_cast<double>(p.version);
    if (p.pass_at_1) {
      pass.x.push_back(v);
      pass.y.push_back(100 * *p.pass_at_1);
    }
    if (p.version < 1) continue;  // version 0 is the start, not a committed round
    reward.x.push_back(v);
    reward.y.push_back(p.reward_mean);
    mesh_bytes.x.push_back(v);
    mesh_bytes.y.push_back(p.bytes_up + p.bytes_down);
    dp_bytes.x.push_back(v);
    dp_bytes.y.push_back(p.bytes_dataparallel);
  }
  std::vector<ReportChart> out;

  SvgLineChart r;
  r.title = "Reward (mean of the round's updates)";
  r.x_label = "version";
  r.y_label = "reward";
  r.series = {reward};
  r.empty_note = "no committed version yet";
  out.push_back({"reward", svg_line_chart(r)});

  SvgLineChart p;
  p.title = "Held-out pass@1 (%)";
  p.x_label = "version";
  p.y_label = "pass@1 %";
  p.series = {pass};
  p.y_min = 0;
  p.y_max = 100;
  p.empty_note = "not evaluated in this run (meshrl coordinator --eval, [mesh] eval_every_rounds)";
  out.push_back({"pass_at_1", svg_line_chart(p)});

  SvgLineChart b;
  b.title = "Bytes on the wire vs fp32 data-parallel (cumulative)";
  b.x_label = "version";
  b.y_label = "bytes (log scale)";
  b.series = {mesh_bytes, dp_bytes};
  b.log_y = true;
  b.y_tick = megabytes;
  b.empty_note = "no committed version yet";
  out.push_back({"bytes", svg_line_chart(b)});

  SvgBarChart h;
  h.title = "Staleness of applied updates (versions)";
  h.x_label = "staleness (versions behind when applied)";
  h.y_label = "updates";
  h.labels = staleness_labels(s.staleness_le);
  for (int64_t n : s.staleness_bucket_counts) h.values.push_back(static_cast<double>(n));
  out.push_back({"staleness", svg_bar_chart(h)});
  return out;
}

}  // namespace meshrl::web
