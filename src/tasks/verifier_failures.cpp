// Verifier failure counts and budget. See verifier_failures.h.
#include "tasks/verifier_failures.h"

#include <algorithm>
#include <cstdio>

namespace meshrl::tasks {

void VerifierFailureCounts::add(VerifierFailure f) {
  if (f == VerifierFailure::kTimeout) ++timeout;
  if (f == VerifierFailure::kCrash) ++crash;
  if (f == VerifierFailure::kGarbage) ++garbage;
}

VerifierFailureCounts& VerifierFailureCounts::operator+=(const VerifierFailureCounts& o) {
  timeout += o.timeout;
  crash += o.crash;
  garbage += o.garbage;
  return *this;
}

nlohmann::json verifier_failures_to_json(const VerifierFailureCounts& c) {
  return {{"timeout", c.timeout}, {"crash", c.crash}, {"garbage", c.garbage}};
}

VerifierFailureWindow::VerifierFailureWindow(double max_rate, int64_t window) : max_rate_(max_rate), window_(window < 1 ? 1 : window) {}

Status VerifierFailureWindow::record(VerifierFailure outcome, const std::string& detail) {
  std::lock_guard<std::mutex> lk(mu_);
  if (ring_.size() < static_cast<size_t>(window_)) {
    ring_.push_back(outcome);
  } else {
    const VerifierFailure old = ring_[next_];
    // Take the oldest call out of the window's counts before it is overwritten.
    if (old == VerifierFailure::kTimeout) --in_window_.timeout;
    if (old == VerifierFailure::kCrash) --in_window_.crash;
    if (old == VerifierFailure::kGarbage) --in_window_.garbage;
    ring_[next_] = outcome;
  }
  next_ = (next_ + 1) % static_cast<size_t>(window_);
  in_window_.add(outcome);
  const int64_t failed = in_window_.total();
  if (outcome == VerifierFailure::kNone || static_cast<double>(failed) <= max_rate_ * static_cast<double>(window_)) return Status::ok();
  char rate[32];
  std::snprintf(rate, sizeof rate, "%g", max_rate_);
  return io_error("[tasks] the verifier failed on " + std::to_string(failed) + " of the last " +
                  std::to_string(std::min<int64_t>(window_, static_cast<int64_t>(ring_.size()))) + " calls (timeout " +
                  std::to_string(in_window_.timeout) + ", crash " + std::to_string(in_window_.crash) + ", garbage " +
                  std::to_string(in_window_.garbage) + "), more than [task] max_failure_rate = " + rate + " of failure_window = " +
                  std::to_string(window_) + " allows; the last: " + detail +
                  ". Fix the verifier (run it by hand on that completion), or raise [task] max_failure_rate or failure_window");
}

VerifierFailureCounts VerifierFailureWindow::recent() const {
  std::lock_guard<std::mutex> lk(mu_);
  return in_window_;
}

}  // namespace meshrl::tasks
