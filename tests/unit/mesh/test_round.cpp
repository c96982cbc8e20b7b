// The coordinator's round rules (src/mesh/round.h), with numbers checked by hand.
//   build-mesh/tests/test_mesh --gtest_filter='Round*'
#include <gtest/gtest.h>

#include <cmath>

#include "mesh/aggregate.h"
#include "mesh/round.h"

namespace meshrl::mesh {
namespace {

RoundRules sync_rules(double quorum = 1.0) {
  RoundRules r;
  r.mode = RoundMode::kSync;
  r.quorum = quorum;
  r.deadline_s = 60;
  r.max_staleness = 2;
  return r;
}

TEST(RoundAdmit, FreshUpdateWeighsItsSamples) {
  const Admission a = admit_update(sync_rules(), 5, 5, 128);
  EXPECT_TRUE(a.accepted);
  EXPECT_EQ(a.staleness, 0);
  EXPECT_DOUBLE_EQ(a.weight, 128.0);
}

TEST(RoundAdmit, StaleUpdateIsDiscountedThenRefused) {
  const Admission one = admit_update(sync_rules(), 5, 4, 100);
  EXPECT_TRUE(one.accepted);
  EXPECT_NEAR(one.weight, 100.0 / std::sqrt(2.0), 1e-9);  // 1/sqrt(1 + 1)
  const Admission two = admit_update(sync_rules(), 5, 3, 100);
  EXPECT_TRUE(two.accepted);
  EXPECT_NEAR(two.weight, 100.0 / std::sqrt(3.0), 1e-9);
  const Admission three = admit_update(sync_rules(), 5, 2, 100);
  EXPECT_FALSE(three.accepted);
  EXPECT_NE(three.reason.find("too old"), std::string::npos) << three.reason;
}

TEST(RoundAdmit, FutureBaseAndNoSamplesAreRefused) {
  EXPECT_FALSE(admit_update(sync_rules(), 5, 6, 10).accepted);
  EXPECT_FALSE(admit_update(sync_rules(), 5, 5, 0).accepted);
  EXPECT_FALSE(admit_update(sync_rules(), 5, -1, 10).accepted);
}

TEST(RoundQuorum, CountsAreCeilingsOfTheShare) {
  EXPECT_EQ(quorum_count(1.0, 4), 4);
  EXPECT_EQ(quorum_count(0.5, 4), 2);
  EXPECT_EQ(quorum_count(0.6, 4), 3);   // ceil(2.4)
  EXPECT_EQ(quorum_count(0.75, 4), 3);  // exactly 3, not 4 from rounding
  EXPECT_EQ(quorum_count(1.0, 0), 1);   // never zero: a round needs an update
}

TEST(RoundClose, SyncWaitsForQuorumOrDeadline) {
  const RoundRules r = sync_rules(1.0);
  OpenRound round{3, 100.0, 0, 0};
  EXPECT_EQ(should_close(r, round, 4, 1000.0), CloseReason::kOpen);  // empty: never
  round.n_updates = 3;
  round.n_fresh_nodes = 3;
  EXPECT_EQ(should_close(r, round, 4, 130.0), CloseReason::kOpen);
  EXPECT_EQ(should_close(r, round, 3, 130.0), CloseReason::kQuorum);  // a node dropped: 3 of 3
  EXPECT_EQ(should_close(r, round, 4, 160.0), CloseReason::kDeadline);
}

TEST(RoundClose, StaleUpdatesDoNotMakeQuorum) {
  const RoundRules r = sync_rules(0.5);
  OpenRound round{3, 0.0, 4, 1};  // four updates in, only one on version 3 itself
  EXPECT_EQ(should_close(r, round, 4, 1.0), CloseReason::kOpen);
  round.n_fresh_nodes = 2;
  EXPECT_EQ(should_close(r, round, 4, 1.0), CloseReason::kQuorum);
}

TEST(RoundClose, AsyncClosesOnAnyUpdate) {
  RoundRules r = sync_rules();
  r.mode = RoundMode::kAsync;
  OpenRound round{3, 0.0, 0, 0};
  EXPECT_EQ(should_close(r, round, 4, 0.0), CloseReason::kOpen);
  round.n_updates = 1;
  EXPECT_EQ(should_close(r, round, 4, 0.0), CloseReason::kAsync);
  EXPECT_STREQ(close_reason_name(CloseReason::kAsync), "async");
}

TEST(RoundAsyncShare, OneUpdateIsItsShareOfARoundAndStalenessCounts) {
  RoundRules r = sync_rules();
  r.mode = RoundMode::kAsync;
  // One fresh update of 96 samples among 4 online nodes: a quarter of a sync round.
  Admission fresh = admit_update(r, 10, 10, 96);
  EXPECT_DOUBLE_EQ(async_round_share(fresh.weight, 96, 1, 4), 0.25);
  // One version behind: its staleness weight (1/sqrt(2)) survives, where a weighted mean of one
  // update would have cancelled it.
  Admission stale = admit_update(r, 10, 9, 96);
  EXPECT_DOUBLE_EQ(async_round_share(stale.weight, 96, 1, 4), 0.25 * staleness_weight(1, r.max_staleness));
  EXPECT_LT(async_round_share(stale.weight, 96, 1, 4), async_round_share(fresh.weight, 96, 1, 4));
  // Every node's fresh update in one version is a whole round, as in sync mode.
  EXPECT_DOUBLE_EQ(async_round_share(4 * fresh.weight, 4 * 96, 4, 4), 1.0);
  // A lone node is the whole mesh; a count of 0 online (all leases lapsed as it closes) counts as 1.
  EXPECT_DOUBLE_EQ(async_round_share(fresh.weight, 96, 1, 1), 1.0);
  EXPECT_DOUBLE_EQ(async_round_share(fresh.weight, 96, 1, 0), 1.0);
}

}  // namespace
}  // namespace meshrl::mesh
