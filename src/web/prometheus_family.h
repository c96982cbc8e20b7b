// The Prometheus text exposition format (version 0.0.4), one metric family at a time: HELP and TYPE
// lines, then samples with escaped label values; numbers as Prometheus reads them (NaN, +Inf).
// Shared by the coordinator's /metrics (prometheus_text.h) and a node's (node_prometheus_text.h),
// so both write the format the same way. Knows nothing about runs.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace meshrl::web {

inline constexpr const char* kPrometheusContentType = "text/plain; version=0.0.4; charset=utf-8";

// A label value with \, " and newline escaped as the format requires.
std::string prometheus_escape(const std::string& v);

// "NaN", "+Inf", "-Inf", else the shortest text that reads back to the same double.
std::string prometheus_number(double x);

// Writes HELP and TYPE on construction, then one line per sample() into `out`.
class PrometheusFamily {
 public:
  // type: counter | gauge | histogram. name: counters end in _total by convention.
  PrometheusFamily(std::string& out, const std::string& name, const char* type, const char* help);
  // labels: {"k", "v", "k2", "v2", ...}; suffix is appended to the name (_bucket, _sum, _count).
  void sample(double value, std::initializer_list<std::string> labels = {}, const std::string& suffix = "");
  // A whole histogram: counts are per bucket, not cumulative, one per upper bound in le plus a
  // last one for +Inf; extra_labels go on every line (e.g. {"node", "paris"}).
  void histogram(const std::vector<double>& le, const std::vector<int64_t>& counts, double sum,
                 std::initializer_list<std::string> extra_labels = {});

 private:
  void line(const std::string& suffix, const std::vector<std::string>& labels, double value);
  std::string& out_;
  std::string name_;
};

}  // namespace meshrl::web
