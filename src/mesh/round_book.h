// The open round's book: which updates count in the version being built, with what weight, and
// the one-vote rule that keeps one node from outvoting the others. Pure bookkeeping (no tensors,
// no ledger, no clock), so the rule is unit-tested on its own (tests/unit/mesh/test_round_book.cpp);
// the coordinator folds the tensors of what the book counts into its aggregator.
//
// One vote per node per round: a node has at most one update in the round. A fresh update (on
// the round's own version) is counted at once; a stale one (a slow node's, on an older version) is
// held until the round closes, because a fresher update of the same node may still arrive and
// then takes its place (the stale one is `superseded`). A second update that is not fresher than
// the node's entry is refused (`one_vote`). An honest late update therefore still counts in the
// next round when its node sends nothing fresher, and a node that repeats itself gets one vote.
//
// Across rounds, a node's update must sit on a base version above that of its last applied one
// (`last_applied_base`): one update per node per base version, in sync and async mode alike.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mesh/reject_code.h"
#include "store/ledger.h"

namespace meshrl::mesh {

struct RoundEntry {
  store::UpdateKey key;
  double weight = 0;           // n_samples x staleness weight (round.h admit_update)
  int64_t staleness = 0;       // round version - base version
  int64_t n_samples = 0;
  bool has_stats = false;      // false for updates re-read from the ledger after a restart
  double reward_mean = 0, kl = 0, entropy = 0;  // as the node reported them (signed)
};

struct BookDecision {
  bool accepted = false;
  RejectCode code = RejectCode::kOneVote;  // when refused
  std::string reason;
  bool count_now = false;                  // fresh: fold into the aggregator now; else held until close
  std::optional<store::UpdateKey> superseded;  // a held entry of the same node that this one replaces
};

class RoundBook {
 public:
  // What placing `e` would do; changes nothing. `round_version` is the version the round builds on.
  BookDecision offer(const RoundEntry& e) const;
  // Records `e` as `d` (an accepted decision of offer()) says; drops the superseded entry.
  void place(const RoundEntry& e, const BookDecision& d);

  // Across rounds: refuses a base at or below the node's last applied base (one update per base version).
  std::string check_new_base(const store::UpdateKey& key) const;
  void set_last_applied_base(const std::string& node, int64_t base);
  std::optional<int64_t> last_applied_base(const std::string& node) const;

  const std::vector<RoundEntry>& counted() const { return counted_; }
  const std::vector<RoundEntry>& held() const { return held_; }
  // Every entry that goes into the version: counted in arrival order, then held in arrival order.
  std::vector<RoundEntry> entries() const;
  int64_t n_updates() const { return static_cast<int64_t>(counted_.size() + held_.size()); }
  int64_t n_fresh_nodes() const;
  int64_t samples() const;        // sum of n_samples, saturating at INT64_MAX
  double mean_staleness() const;
  double mean_reward() const;     // over the entries with stats
  double mean_kl() const;
  double mean_entropy() const;

  // A version was built from entries(): their bases become the nodes' last applied bases.
  void close();

 private:
  const RoundEntry* entry_of(const std::string& node) const;
  std::vector<RoundEntry> counted_, held_;
  std::map<std::string, int64_t> last_applied_base_;
};

}  // namespace meshrl::mesh
