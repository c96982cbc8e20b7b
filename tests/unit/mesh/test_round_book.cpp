// The open round's book (mesh/round_book.h): one vote per node per round, a stale update held
// until the close and superseded by a fresher one of its node, one update per base version
// across rounds, and statistics that cannot overflow on node-controlled counts.
//   build/tests/test_mesh --gtest_filter='RoundBook*:RoundRules*'
#include <gtest/gtest.h>

#include <cstdint>

#include "mesh/round.h"
#include "mesh/round_book.h"

namespace meshrl::mesh {
namespace {

RoundEntry entry(const std::string& node, int64_t base, int64_t seq, int64_t staleness, int64_t n = 8) {
  RoundEntry e;
  e.key = {node, base, seq};
  e.staleness = staleness;
  e.n_samples = n;
  e.weight = static_cast<double>(n);
  e.has_stats = true;
  e.reward_mean = 0.5;
  return e;
}

// Offers and, when accepted, places; returns the decision.
BookDecision put(RoundBook& b, const RoundEntry& e) {
  BookDecision d = b.offer(e);
  if (d.accepted) b.place(e, d);
  return d;
}

TEST(RoundBook, AFreshUpdateCountsAndARepeatIsRefused) {
  RoundBook b;
  const BookDecision first = put(b, entry("mallory", 5, 1, 0));
  EXPECT_TRUE(first.accepted);
  EXPECT_TRUE(first.count_now);
  for (int64_t seq = 2; seq <= 5; ++seq) {
    const BookDecision again = put(b, entry("mallory", 5, seq, 0));
    EXPECT_FALSE(again.accepted) << seq;
    EXPECT_EQ(again.code, RejectCode::kOneVote);
    EXPECT_NE(again.reason.find("one vote per node per round"), std::string::npos) << again.reason;
  }
  EXPECT_TRUE(put(b, entry("alice", 5, 9, 0)).accepted);
  EXPECT_EQ(b.n_updates(), 2);
  EXPECT_EQ(b.n_fresh_nodes(), 2);
  EXPECT_EQ(b.samples(), 16);
}

TEST(RoundBook, AStaleUpdateIsHeldAndAFresherOneOfItsNodeTakesItsPlace) {
  RoundBook b;
  const BookDecision late = put(b, entry("toronto", 4, 10, 1));
  EXPECT_TRUE(late.accepted);
  EXPECT_FALSE(late.count_now);  // held until the close
  EXPECT_EQ(b.held().size(), 1u);
  EXPECT_EQ(b.n_fresh_nodes(), 0);
  // An older one of the same node is refused; a fresher stale one replaces it...
  EXPECT_FALSE(put(b, entry("toronto", 3, 20, 2)).accepted);
  const BookDecision newer = put(b, entry("toronto", 4, 11, 1));
  ASSERT_TRUE(newer.accepted);
  ASSERT_TRUE(newer.superseded.has_value());
  EXPECT_EQ(newer.superseded->seq, 10);
  // ...and so does a fresh one, which counts at once.
  const BookDecision fresh = put(b, entry("toronto", 5, 12, 0));
  ASSERT_TRUE(fresh.accepted);
  EXPECT_TRUE(fresh.count_now);
  ASSERT_TRUE(fresh.superseded.has_value());
  EXPECT_EQ(fresh.superseded->seq, 11);
  EXPECT_EQ(b.n_updates(), 1);
  EXPECT_TRUE(b.held().empty());
  ASSERT_EQ(b.entries().size(), 1u);
  EXPECT_EQ(b.entries()[0].key.seq, 12);
}

TEST(RoundBook, AnHonestLateUpdateStillCountsInTheNextRound) {
  RoundBook b;
  ASSERT_TRUE(put(b, entry("paris", 5, 1, 0)).accepted);
  ASSERT_TRUE(put(b, entry("toronto", 4, 2, 1)).accepted);  // toronto sends nothing fresher
  ASSERT_EQ(b.entries().size(), 2u);
  EXPECT_EQ(b.entries()[1].key.node, "toronto");
  EXPECT_DOUBLE_EQ(b.mean_staleness(), 0.5);
}

TEST(RoundBook, OneUpdatePerNodePerBaseVersionAcrossRounds) {
  RoundBook b;
  ASSERT_TRUE(put(b, entry("mallory", 5, 1, 0)).accepted);
  b.close();
  EXPECT_EQ(b.n_updates(), 0);
  EXPECT_EQ(b.last_applied_base("mallory"), 5);
  // The next round builds on version 6: an update on the base already applied is refused.
  const BookDecision same = b.offer(entry("mallory", 5, 2, 1));
  EXPECT_FALSE(same.accepted);
  EXPECT_NE(same.reason.find("one update per node per base version"), std::string::npos) << same.reason;
  EXPECT_TRUE(b.offer(entry("mallory", 6, 3, 0)).accepted);
  EXPECT_TRUE(b.offer(entry("alice", 5, 3, 1)).accepted);
}

TEST(RoundBook, SamplesSaturateInsteadOfOverflowing) {
  RoundBook b;
  ASSERT_TRUE(put(b, entry("a", 1, 1, 0, INT64_MAX - 1)).accepted);
  ASSERT_TRUE(put(b, entry("b", 1, 1, 0, INT64_MAX - 1)).accepted);
  EXPECT_EQ(b.samples(), INT64_MAX);
}

TEST(RoundBook, StatisticsSkipEntriesWithoutReportedStats) {
  RoundBook b;
  RoundEntry restored = entry("a", 1, 1, 0);
  restored.has_stats = false;  // re-read from the ledger after a restart: no reward known
  restored.reward_mean = 0;
  ASSERT_TRUE(put(b, restored).accepted);
  ASSERT_TRUE(put(b, entry("b", 1, 1, 0)).accepted);
  EXPECT_DOUBLE_EQ(b.mean_reward(), 0.5);
}

TEST(RoundRules, SamplesAreBoundedByWhatOneUpdateCanHold) {
  RoundRules r;
  r.max_staleness = 2;
  r.max_samples_per_update = samples_per_update_bound(3, 16, 8);
  EXPECT_EQ(r.max_samples_per_update, 384);
  EXPECT_TRUE(admit_update(r, 5, 5, 384).accepted);
  const Admission big = admit_update(r, 5, 5, 1'000'000'000'000);
  EXPECT_FALSE(big.accepted);
  EXPECT_EQ(big.code, RejectCode::kClaim);
  EXPECT_NE(big.reason.find("384"), std::string::npos) << big.reason;
  const Admission zero = admit_update(r, 5, 5, 0);
  EXPECT_FALSE(zero.accepted);
  EXPECT_EQ(zero.code, RejectCode::kClaim);  // its own reason, not "stale"
  const Admission old = admit_update(r, 5, 1, 8);
  EXPECT_EQ(old.code, RejectCode::kStale);
  EXPECT_EQ(samples_per_update_bound(INT64_MAX, 2, 2), INT64_MAX);
  EXPECT_EQ(samples_per_update_bound(0, 2, 2), 0);
}

}  // namespace
}  // namespace meshrl::mesh
