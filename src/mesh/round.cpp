// The round rules. See round.h.
#include "mesh/round.h"

#include <algorithm>
#include <cmath>

#include "mesh/aggregate.h"

namespace meshrl::mesh {

Admission admit_update(const RoundRules& r, int64_t v, int64_t b, int64_t n_samples) {
  Admission a;
  a.staleness = v - b;
  if (b > v) {
    a.reason = "base version " + std::to_string(b) + " does not exist yet (current is " + std::to_string(v) + ")";
    return a;
  }
  if (b < 0 || a.staleness > r.max_staleness) {
    a.reason = "base version " + std::to_string(b) + " is too old: current is " + std::to_string(v) +
               ", max_staleness " + std::to_string(r.max_staleness) + "; download the current version";
    return a;
  }
  if (n_samples < 1) {
    a.code = RejectCode::kClaim;
    a.reason = "n_samples must be >= 1, got " + std::to_string(n_samples);
    return a;
  }
  if (r.max_samples_per_update > 0 && n_samples > r.max_samples_per_update) {
    a.code = RejectCode::kClaim;
    a.reason = "n_samples " + std::to_string(n_samples) + " is more than one update of this run can hold (" +
               std::to_string(r.max_samples_per_update) + " = inner_steps x prompts_per_step x group_size)";
    return a;
  }
  a.accepted = true;
  a.weight = static_cast<double>(n_samples) * staleness_weight(a.staleness, r.max_staleness);
  return a;
}

int64_t samples_per_update_bound(int64_t inner_steps, int64_t prompts_per_step, int64_t group_size) {
  int64_t out = 1;
  for (int64_t f : {inner_steps, prompts_per_step, group_size}) {
    if (f < 1) return 0;
    if (__builtin_mul_overflow(out, f, &out)) return INT64_MAX;
  }
  return out;
}

const char* close_reason_name(CloseReason r) {
  switch (r) {
    case CloseReason::kOpen: return "open";
    case CloseReason::kQuorum: return "quorum";
    case CloseReason::kDeadline: return "deadline";
    case CloseReason::kAsync: return "async";
  }
  return "?";
}

int64_t quorum_count(double quorum, int64_t nodes_online) {
  const int64_t q = static_cast<int64_t>(std::ceil(quorum * static_cast<double>(nodes_online) - 1e-9));
  return q < 1 ? 1 : q;
}

CloseReason should_close(const RoundRules& r, const OpenRound& round, int64_t nodes_online, double now_s) {
  if (round.n_updates == 0) return CloseReason::kOpen;
  if (r.mode == RoundMode::kAsync) return CloseReason::kAsync;
  if (round.n_fresh_nodes >= quorum_count(r.quorum, nodes_online)) return CloseReason::kQuorum;
  if (now_s - round.opened_at_s >= r.deadline_s) return CloseReason::kDeadline;
  return CloseReason::kOpen;
}

double async_round_share(double total_weight, int64_t n_samples, int64_t n_updates, int64_t nodes_online) {
  const double full_round = static_cast<double>(std::max<int64_t>(1, nodes_online)) * static_cast<double>(n_samples) /
                            static_cast<double>(std::max<int64_t>(1, n_updates));
  return full_round > 0 ? total_weight / full_round : 0.0;
}

}  // namespace meshrl::mesh
