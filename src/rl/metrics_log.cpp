// Appending JSON Lines writer. See metrics_log.h.
#include "rl/metrics_log.h"

#include <cerrno>
#include <cmath>
#include <cstring>

namespace meshrl::rl {

namespace {
nlohmann::json finite_only(const nlohmann::json& j) {
  if (j.is_number_float()) return std::isfinite(j.get<double>()) ? j : nlohmann::json(nullptr);
  if (j.is_object() || j.is_array()) {
    nlohmann::json out = j;
    for (auto it = out.begin(); it != out.end(); ++it) *it = finite_only(*it);
    return out;
  }
  return j;
}
}  // namespace

Result<MetricsLog> MetricsLog::open(const std::filesystem::path& path) {
  MetricsLog log;
  log.path_ = path;
  log.file_.reset(std::fopen(path.c_str(), "a"));
  if (!log.file_) return io_error("[metrics] cannot open " + path.string() + " for appending: " + std::strerror(errno));
  return log;
}

Status MetricsLog::write(const nlohmann::json& j) {
  const std::string line = finite_only(j).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_.get()) != line.size() || std::fflush(file_.get()) != 0)
    return io_error("[metrics] cannot write to " + path_.string() + ": " + std::strerror(errno));
  return Status::ok();
}

}  // namespace meshrl::rl
