// Counting an external verifier's failures, and the budget that decides when they stop a run.
// One hanging or crashing call costs one sample (task.h: Score.failure); only a verifier that
// fails often is a reason to stop, because then every reward it gives is suspect. Knows nothing
// about training, tensors or the network.
//
// The budget: stop once more than max_failure_rate * failure_window of the last failure_window
// calls failed ([task] keys, task_config.h). The count is held against the whole window from the
// first call on, so a verifier that fails every time stops the run after a handful of calls
// rather than after a full window. max_failure_rate = 0 stops at the first failure.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/status.h"
#include "tasks/task.h"

namespace meshrl::tasks {

// Failures by kind, e.g. in one training step; a completion counts once.
struct VerifierFailureCounts {
  int64_t timeout = 0;
  int64_t crash = 0;
  int64_t garbage = 0;

  void add(VerifierFailure f);  // kNone adds nothing
  int64_t total() const { return timeout + crash + garbage; }
  VerifierFailureCounts& operator+=(const VerifierFailureCounts& o);
};

// {"timeout": 0, "crash": 2, "garbage": 1}
nlohmann::json verifier_failures_to_json(const VerifierFailureCounts& c);

// The last `window` calls' outcomes in a ring. Safe to call from several threads.
class VerifierFailureWindow {
 public:
  // max_rate in [0, 1], window >= 1 (validate_task_config checks both).
  VerifierFailureWindow(double max_rate, int64_t window);

  // Records one call (kNone = it gave a reward). Errors when this call takes the failures among
  // the last `window` calls past the budget: the message counts them by kind, quotes `detail`
  // (what went wrong on this call) and names the keys to change.
  Status record(VerifierFailure outcome, const std::string& detail);

  VerifierFailureCounts recent() const;  // failures among the last `window` calls

 private:
  double max_rate_;
  int64_t window_;
  mutable std::mutex mu_;
  std::vector<VerifierFailure> ring_;  // grows to `window`, then wraps
  size_t next_ = 0;
  VerifierFailureCounts in_window_;
};

}  // namespace meshrl::tasks
