// VersionLog: the per-version history of a run (reward, KL, entropy, staleness, bytes, pass@1),
// kept in memory for the dashboard and appended to RUN_DIR/metrics.jsonl, one JSON object a line:
//   {"kind":"version", "version":3, "reward_mean":0.41, ...}   one per committed version
//   {"kind":"eval", "version":3, "pass_at_1":0.27}             when the coordinator evaluated
// Reopening a run directory (resume, `meshrl report`) reads the file back, so the curves survive
// a restart. Thread-safe. Knows nothing about the mesh: the caller converts its reports.
#pragma once

#include <filesystem>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "web/run_snapshot.h"

namespace meshrl::web {

class VersionLog {
 public:
  // Reads RUN_DIR/metrics.jsonl when present (a torn last line from a crash is skipped).
  explicit VersionLog(std::filesystem::path file);

  // A version replaces an earlier entry of the same number (a resumed run re-commits nothing, but
  // a crash between the version and its line may leave a gap, never a duplicate).
  Status add_version(const VersionPoint& p);
  Status add_eval(int64_t version, double pass_at_1);

  std::vector<VersionPoint> points() const;  // by version
  const std::filesystem::path& file() const { return file_; }

  // Parses a metrics.jsonl text (tests, reports); malformed lines are skipped.
  static std::vector<VersionPoint> parse(const std::string& text);

 private:
  Status append(const std::string& line);
  std::filesystem::path file_;
  mutable std::mutex mu_;
  std::vector<VersionPoint> points_;
};

// At most latest + 2 x history + 1 of `points` (ascending by version), so that the dashboard's
// curves keep their size whatever the run's length: the last `latest`, every stride-th earlier
// point and every stride-th earlier evaluation (power-of-two strides, the smallest that fit in
// `history`, so the points kept stay the same from one poll to the next), and the latest
// evaluation (what /metrics reports as pass@1).
std::vector<VersionPoint> thin_points(std::vector<VersionPoint> points, size_t latest, size_t history);

// What the live dashboard keeps (coordinator_snapshot.h): at most 401 points, about 120 KiB of JSON.
inline constexpr size_t kVersionsLatest = 200;
inline constexpr size_t kVersionsHistory = 100;

}  // namespace meshrl::web
