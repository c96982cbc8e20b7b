#include "web/prometheus_family.h"

#include <cmath>
#include <cstdio>

namespace meshrl::web {

std::string prometheus_escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string prometheus_number(double x) {
  if (std::isnan(x)) return "NaN";
  if (std::isinf(x)) return x > 0 ? "+Inf" : "-Inf";
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

PrometheusFamily::PrometheusFamily(std::string& out, const std::string& name, const char* type, const char* help)
    : out_(out), name_(name) {
  out_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void PrometheusFamily::line(const std::string& suffix, const std::vector<std::string>& labels, double value) {
  out_ += name_ + suffix;
  if (!labels.empty()) {
    out_ += "{";
    for (size_t i = 0; i + 1 < labels.size(); i += 2) {
      if (i > 0) out_ += ",";
      out_ += labels[i] + "=\"" + prometheus_escape(labels[i + 1]) + "\"";
    }
    out_ += "}";
  }
  out_ += " " + prometheus_number(value) + "\n";
}

void PrometheusFamily::sample(double value, std::initializer_list<std::string> labels, const std::string& suffix) {
  line(suffix, std::vector<std::string>(labels), value);
}

void PrometheusFamily::histogram(const std::vector<double>& le, const std::vector<int64_t>& counts, double sum,
                                 std::initializer_list<std::string> extra_labels) {
  const std::vector<std::string> extra(extra_labels);
  int64_t cum = 0;
  for (size_t i = 0; i < le.size() && i < counts.size(); ++i) {
    cum += counts[i];
    std::vector<std::string> l = extra;
    l.insert(l.end(), {"le", prometheus_number(le[i])});
    line("_bucket", l, static_cast<double>(cum));
  }
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  std::vector<std::string> l = extra;
  l.insert(l.end(), {"le", "+Inf"});
  line("_bucket", l, static_cast<double>(total));
  line("_sum", extra, sum);
  line("_count", extra, static_cast<double>(total));
}

}  // namespace meshrl::web
