#include "web/version_log.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "web/state_json.h"

namespace meshrl::web {

namespace {

// Merges an entry into points (kept sorted by version).
void merge(std::vector<VersionPoint>& points, const nlohmann::json& j) {
  const int64_t v = j.value("version", int64_t{-1});
  if (v < 0) return;
  auto it = std::find_if(points.begin(), points.end(), [&](const VersionPoint& p) { return p.version == v; });
  if (j.value("kind", "") == "eval") {
    if (!j.contains("pass_at_1") || !j["pass_at_1"].is_number()) return;
    if (it == points.end()) {
      VersionPoint p;
      p.version = v;
      it = points.insert(std::upper_bound(points.begin(), points.end(), v, [](int64_t x, const VersionPoint& q) { return x < q.version; }), p);
    }
    it->pass_at_1 = j["pass_at_1"].get<double>();
    return;
  }
  VersionPoint p;
  p.version = v;
  p.seconds = j.value("seconds", 0.0);
  p.closed_by = j.value("closed_by", "");
  p.n_updates = j.value("n_updates", int64_t{0});
  p.reward_mean = j.value("reward_mean", 0.0);
  p.kl_mean = j.value("kl_mean", 0.0);
  p.entropy_mean = j.value("entropy_mean", 0.0);
  p.mean_staleness = j.value("mean_staleness", 0.0);
  p.bytes_up = j.value("bytes_up", 0.0);
  p.bytes_down = j.value("bytes_down", 0.0);
  p.bytes_dataparallel = j.value("bytes_dataparallel", 0.0);
  if (it != points.end()) {
    p.pass_at_1 = it->pass_at_1;  // an eval line may come first (version 0)
    *it = p;
  } else {
    points.insert(std::upper_bound(points.begin(), points.end(), v, [](int64_t x, const VersionPoint& q) { return x < q.version; }), p);
  }
}

}  // namespace

std::vector<VersionPoint> VersionLog::parse(const std::string& text) {
  std::vector<VersionPoint> points;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object()) merge(points, j);
  }
  return points;
}

VersionLog::VersionLog(std::filesystem::path file) : file_(std::move(file)) {
  auto text = read_file(file_, 256u << 20);
  if (text.is_ok()) points_ = parse(text.value());
}

Status VersionLog::append(const std::string& line) {
  std::FILE* f = std::fopen(file_.c_str(), "a");
  if (!f) return io_error("[metrics] cannot append to " + file_.string());
  const bool ok = std::fputs((line + "\n").c_str(), f) >= 0;
  std::fclose(f);
  return ok ? Status::ok() : io_error("[metrics] write to " + file_.string() + " failed");
}

Status VersionLog::add_version(const VersionPoint& p) {
  nlohmann::json j = version_point_json(p);
  j.erase("pass_at_1");
  j["kind"] = "version";
  std::lock_guard<std::mutex> lk(mu_);
  merge(points_, j);
  return append(j.dump());
}

Status VersionLog::add_eval(int64_t version, double pass_at_1) {
  const nlohmann::json j = {{"kind", "eval"}, {"version", version}, {"pass_at_1", pass_at_1}};
  std::lock_guard<std::mutex> lk(mu_);
  merge(points_, j);
  return append(j.dump());
}

std::vector<VersionPoint> VersionLog::points() const {
  std::lock_guard<std::mutex> lk(mu_);
  return points_;
}

namespace {

// The smallest power of two that leaves at most `history` of n items (1 when n fits).
size_t stride_for(size_t n, size_t history) {
  size_t stride = 1;
  while (history > 0 && (n + stride - 1) / stride > history) stride *= 2;
  return stride;
}

}  // namespace

std::vector<VersionPoint> thin_points(std::vector<VersionPoint> points, size_t latest, size_t history) {
  const size_t n = points.size();
  if (n <= latest + history) return points;
  const size_t earlier = n - latest;
  std::vector<bool> keep(n, false);
  for (size_t i = earlier; i < n; ++i) keep[i] = true;
  if (history > 0) {
    const size_t stride = stride_for(earlier, history);
    for (size_t i = 0; i < earlier; i += stride) keep[i] = true;
    std::vector<size_t> evals;
    for (size_t i = 0; i < earlier; ++i)
      if (points[i].pass_at_1) evals.push_back(i);
    const size_t eval_stride = stride_for(evals.size(), history);
    for (size_t k = 0; k < evals.size(); k += eval_stride) keep[evals[k]] = true;
  }
  for (size_t i = n; i-- > 0;)
    if (points[i].pass_at_1) {
      keep[i] = true;
      break;
    }
  std::vector<VersionPoint> out;
  for (size_t i = 0; i < n; ++i)
    if (keep[i]) out.push_back(std::move(points[i]));
  return out;
}

}  // namespace meshrl::web
