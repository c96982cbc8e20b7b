// Checks on an update that depend on what came before it, made by the coordinator at ingest
// before an update is spooled or acknowledged (the stateless ones — size, shape, finiteness,
// signature — are elsewhere):
//   NormBound    ||u|| <= factor x the median norm of the last `window` accepted updates (once
//                `min_history` are known: the first updates of a run, or after a restart, set
//                the scale and pass). With factor 10 a 100x update is refused; the run file
//                chooses the factor (off by default: honest norms can be heavy-tailed).
//   RateLimiter  at most `per_minute` submissions per node in any 60 s window, so one node
//                cannot flood the coordinator's disk or CPU.
// Not thread-safe (the coordinator calls them under its mutex). Knows nothing about tensors.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace meshrl::mesh {

class NormBound {
 public:
  NormBound(double factor, int64_t window, int64_t min_history = 3) : factor_(factor), window_(window), min_history_(min_history) {}
  // Empty when `norm` is within the bound (or the bound is off: factor 0); else why not.
  std::string check(double norm) const;
  void accepted(double norm);  // an update of this norm was acknowledged
  std::optional<double> median() const;

 private:
  double factor_;
  int64_t window_, min_history_;
  std::deque<double> recent_;
};

class RateLimiter {
 public:
  explicit RateLimiter(int64_t per_minute) : per_minute_(per_minute) {}
  // Counts the attempt; empty when `node` is within its rate (or the limit is off: 0), else why not.
  std::string admit(const std::string& node, double now_s);

 private:
  int64_t per_minute_;
  std::map<std::string, std::deque<double>> times_;
};

}  // namespace meshrl::mesh
