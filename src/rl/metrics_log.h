// MetricsLog: the run's metrics as JSON Lines, one object per step, appended and flushed after
// every line so a crash loses at most the line being written and `tail -f` shows progress.
// Knows nothing about what the metrics mean.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace meshrl::rl {

class MetricsLog {
 public:
  // Opens for appending (created if missing).
  static Result<MetricsLog> open(const std::filesystem::path& path);

  // Writes j.dump() and a newline, then flushes. Non-finite numbers are written as null (JSON has
  // no NaN), so every line stays valid JSON.
  Status write(const nlohmann::json& j);

  const std::filesystem::path& path() const { return path_; }

 private:
  struct Closer {
    void operator()(std::FILE* f) const { if (f) std::fclose(f); }
  };
  std::filesystem::path path_;
  std::unique_ptr<std::FILE, Closer> file_;
};

}  // namespace meshrl::rl
