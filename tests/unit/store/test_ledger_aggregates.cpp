// The ledger's SQL aggregates (update tallies by reason class, staleness, applied-through counts,
// rounds by how they closed, the latest events cut short), on a handful of rows counted by hand.
//   build/tests/test_store --gtest_filter='LedgerAggregates*'
#include <gtest/gtest.h>

#include <string>

#include "store/ledger.h"
#include "store/sqlite.h"
#include "support/temp_dir.h"

namespace meshrl::store {
namespace {

// Rows written straight into SQLite, so that these read queries are checked on their own.
void insert(const std::filesystem::path& file, const std::string& sql) {
  auto db = sql::Db::open(file, /*create=*/false).value();
  ASSERT_TRUE(db.exec(sql).is_ok()) << sql;
}

class LedgerAggregates : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = dir_.path() / "ledger.sqlite";
    { ASSERT_TRUE(Ledger::open(file_).value().commit_initial("h0").is_ok()); }
    // state: 0 received, 1 applied, 2 rejected.
    insert(file_,
           "INSERT INTO rounds(version, hash, n_updates, closed_by, committed_at) VALUES "
           "(1, 'h1', 2, 'quorum', 1), (2, 'h2', 0, 'deadline', 2), (3, 'h3', 1, 'quorum', 3);"
           "INSERT INTO updates(node, base_version, seq, state, n_samples, bytes, received_at, applied_version, reason) VALUES "
           "('paris', 0, 1, 1, 8, 100, 10, 1, ''),"                  // staleness 0
           "('zurich', 0, 1, 1, 9223372036854775807, 200, 11, 1, ''),"  // a claimed count that must not overflow a sum
           "('paris', 1, 2, 1, 8, 100, 12, 3, ''),"                  // staleness 1
           "('paris', 0, 3, 2, 0, 50, 13, NULL, 'base version 0 is too old'),"
           "('paris', 0, 4, 2, 0, 50, 14, NULL, 'audit_failed: reward 1 vs 0 (too old is not the class)'),"
           "('zurich', 3, 2, 0, 8, 70, 15, NULL, '');"
           "INSERT INTO node_events(node, event, detail, at) VALUES "
           "('paris', 'join', 'cpu', 1), ('zurich', 'join', 'cpu', 2), ('paris', 'leave', '', 3),"
           "('zurich', 'lease_expired', '', 4), ('zurich', 'rejoin', 'a very long device string', 5);");
  }
  test_support::TempDir dir_;
  std::filesystem::path file_;
};

TEST_F(LedgerAggregates, TalliesGroupByNodeStateAndReasonClass) {
  const Ledger ledger = Ledger::open(file_).value();
  const Ledger::ReasonClasses classes{{{"audit_failed:", true, "audit_failed"}, {"too old", false, "stale"}}, "other"};
  const auto t = ledger.update_tallies(classes);
  // (node, state, class) in order: paris applied, paris rejected audit_failed, paris rejected stale,
  // zurich received, zurich applied.
  ASSERT_EQ(t.size(), 5u);
  EXPECT_EQ(t[0].node, "paris");
  EXPECT_EQ(t[0].state, UpdateState::kApplied);
  EXPECT_EQ(t[0].count, 2);
  EXPECT_DOUBLE_EQ(t[0].n_samples, 16);
  EXPECT_DOUBLE_EQ(t[0].bytes, 200);
  EXPECT_DOUBLE_EQ(t[0].last_received_at, 12);
  EXPECT_EQ(t[1].reason_class, "audit_failed");  // the first matching rule wins
  EXPECT_EQ(t[2].reason_class, "stale");
  EXPECT_EQ(t[2].count, 1);
  EXPECT_EQ(t[3].node, "zurich");
  EXPECT_EQ(t[3].state, UpdateState::kReceived);
  EXPECT_EQ(t[3].reason_class, "");
  EXPECT_EQ(t[4].state, UpdateState::kApplied);
  EXPECT_DOUBLE_EQ(t[4].n_samples, 9223372036854775807.0);
  const auto fallback = ledger.update_tallies({{}, "other"});
  EXPECT_EQ(fallback[1].reason_class, "other");
}

TEST_F(LedgerAggregates, StalenessAppliedThroughAndRounds) {
  const Ledger ledger = Ledger::open(file_).value();
  using Counts = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(ledger.applied_staleness_counts(), (Counts{{0, 2}, {1, 1}}));
  EXPECT_EQ(ledger.applied_through({0, 1, 2, 3, 9}), (std::vector<int64_t>{0, 2, 2, 3, 3}));
  EXPECT_EQ(ledger.applied_through({}), std::vector<int64_t>{});
  using Named = std::vector<std::pair<std::string, int64_t>>;
  EXPECT_EQ(ledger.rounds_by_closed_by(), (Named{{"deadline", 1}, {"quorum", 2}}));  // version 0 left out
}

TEST_F(LedgerAggregates, LatestEventsAreFewAndCut) {
  const Ledger ledger = Ledger::open(file_).value();
  const auto latest = ledger.latest_node_events(2, 6);
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[0].event, "lease_");  // oldest first, every text cut to 6 characters
  EXPECT_EQ(latest[1].event, "rejoin");
  EXPECT_EQ(latest[1].detail, "a very");
  EXPECT_DOUBLE_EQ(latest[1].at, 5);
  const auto membership = ledger.latest_event_per_node({"join", "leave", "lease_expired"});
  ASSERT_EQ(membership.size(), 2u);
  EXPECT_EQ(membership[0].node, "paris");
  EXPECT_EQ(membership[0].event, "leave");
  EXPECT_EQ(membership[1].event, "lease_expired");  // rejoin is not among the kinds asked for
  EXPECT_TRUE(ledger.latest_event_per_node({}).empty());
}

}  // namespace
}  // namespace meshrl::store
