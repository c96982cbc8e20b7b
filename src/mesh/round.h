// The round rules of the coordinator, as pure functions of numbers so they are unit-tested
// without a network, a clock or tensors (tests/unit/mesh/test_round.cpp):
//   - admit_update: may an update on base version b enter the round open on version v, and with
//     what weight (its samples times the staleness weight 1/sqrt(1 + (v - b)))? The samples a
//     node claims are bounded by what one update of the run can hold (inner steps x prompts x
//     group size), so no node sets the mean by claiming more.
//   - should_close: does the open round close now (sync: quorum of fresh updates, or the deadline
//     with at least one update; async: as soon as any update is in)?
// Late updates in sync mode (base < v, a slow node) are not lost: they enter the next open round
// with their staleness weight, or are refused past max_staleness.
#pragma once

#include <cstdint>
#include <string>

#include "mesh/reject_code.h"

namespace meshrl::mesh {

enum class RoundMode { kSync, kAsync };

struct RoundRules {
  RoundMode mode = RoundMode::kSync;
  double quorum = 1.0;          // share of online nodes, (0, 1]
  double deadline_s = 600;      // seconds after the round opened
  int64_t max_staleness = 2;
  // The most completions one update can stand for: inner_steps x prompts_per_step x group_size.
  // 0 = unbounded (tests of the rules alone).
  int64_t max_samples_per_update = 0;
};

// The bound of RoundRules.max_samples_per_update for a run's numbers (saturating: never overflows).
int64_t samples_per_update_bound(int64_t inner_steps, int64_t prompts_per_step, int64_t group_size);

struct Admission {
  bool accepted = false;
  std::string reason;           // when refused
  RejectCode code = RejectCode::kStale;  // when refused: kStale (base version) or kClaim (n_samples)
  int64_t staleness = 0;        // v - b
  double weight = 0;            // n_samples * staleness weight
};

// current_version v is the version the open round started from. Refuses b > v (a version that
// does not exist yet), b < v - max_staleness (too old): kStale; n_samples < 1 or above
// max_samples_per_update: kClaim.
Admission admit_update(const RoundRules& rules, int64_t current_version, int64_t base_version, int64_t n_samples);

struct OpenRound {
  int64_t version = 0;          // the round builds version + 1 from this one
  double opened_at_s = 0;       // on the caller's clock
  int64_t n_updates = 0;        // admitted so far, stale ones included
  int64_t n_fresh_nodes = 0;    // distinct nodes whose update is on `version` itself
};

enum class CloseReason { kOpen, kQuorum, kDeadline, kAsync };
const char* close_reason_name(CloseReason r);  // "open", "quorum", "deadline", "async"

// Fresh updates needed to close a sync round: ceil(quorum * nodes_online), at least 1.
int64_t quorum_count(double quorum, int64_t nodes_online);

// Never closes an empty round (there is nothing to build a version from).
CloseReason should_close(const RoundRules& rules, const OpenRound& round, int64_t nodes_online, double now_s);

// Async mode: the share of a full sync round that a version built from these updates stands for,
// by which the coordinator scales their weighted mean before the outer step:
//   total_weight / (nodes_online x n_samples / n_updates)
// The denominator is the weight of one fresh update from each online node, at this round's mean
// samples per update. One fresh update among N nodes is 1/N, and a stale one keeps its staleness
// weight on top. Why: an async version is usually one node's update. Applied whole, N nodes would
// move the weights N times as far per sample as a sync round, which averages them. On the demo at
// outer lr 1 that took held-out pass@1 from 38.4% to 2.6% (BENCHMARKS.md, "demo", 2026-12-01).
// And a weighted mean of one update is that update whatever its weight, so staleness counted for
// nothing. n_updates, n_samples >= 1; nodes_online < 1 counts as 1.
double async_round_share(double total_weight, int64_t n_samples, int64_t n_updates, int64_t nodes_online);

}  // namespace meshrl::mesh
