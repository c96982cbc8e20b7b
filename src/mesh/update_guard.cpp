#include "mesh/update_guard.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace meshrl::mesh {

std::optional<double> NormBound::median() const {
  if (static_cast<int64_t>(recent_.size()) < std::max<int64_t>(1, min_history_)) return std::nullopt;
  std::vector<double> v(recent_.begin(), recent_.end());
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

std::string NormBound::check(double norm) const {
  if (!(norm >= 0)) return "norm is not a number";
  if (factor_ <= 0) return {};
  const auto m = median();
  if (!m || !(*m > 0)) return {};
  if (norm <= factor_ * *m) return {};
  char b[200];
  std::snprintf(b, sizeof b, "update norm %.6g is over %.3g x %.6g, the median norm of the last %zu accepted updates", norm, factor_,
                *m, recent_.size());
  return b;
}

void NormBound::accepted(double norm) {
  recent_.push_back(norm);
  while (static_cast<int64_t>(recent_.size()) > window_) recent_.pop_front();
}

std::string RateLimiter::admit(const std::string& node, double now_s) {
  if (per_minute_ <= 0) return {};
  auto& q = times_[node];
  while (!q.empty() && now_s - q.front() >= 60.0) q.pop_front();
  if (static_cast<int64_t>(q.size()) >= per_minute_)
    return "more than " + std::to_string(per_minute_) + " updates from '" + node + "' in the last 60 s";
  q.push_back(now_s);
  return {};
}

}  // namespace meshrl::mesh
