// Ledger (src/store/ledger.h): the SQLite record of versions, updates and rounds, on real files.
//   OMP_NUM_THREADS=1 ./build-store/tests/test_store --gtest_filter='Ledger*'
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cmath>
#include <fstream>

#include "store/ledger.h"
#include "support/temp_dir.h"

namespace meshrl::store {
namespace {

using test_support::TempDir;

UpdateKey key(const std::string& node, int64_t base, int64_t seq) { return {node, base, seq}; }

// Everything a reader can see, to check that a failed call changed nothing.
std::string snapshot(const Ledger& l) {
  std::string s = "current=" + std::to_string(l.current_version()) + " hash=" + l.current_hash() + "\n";
  for (const auto& r : l.updates())
    s += r.key.str() + " " + update_state_name(r.state) + " " + std::to_string(r.applied_version.value_or(-1)) + " " +
         std::to_string(r.weight) + " " + r.reason + "\n";
  for (const auto& r : l.rounds()) s += "round " + std::to_string(r.version) + " " + r.hash + " " + std::to_string(r.n_updates) + "\n";
  return s;
}

TEST(Ledger, FreshLedgerHasNoVersionUntilCommitInitial) {
  TempDir tmp;
  auto l = Ledger::open(tmp.path() / "ledger.sqlite").value();
  EXPECT_FALSE(l.has_initial());
  EXPECT_EQ(l.current_version(), 0);
  EXPECT_EQ(l.current_hash(), "");
  EXPECT_FALSE(l.commit_round(1, "h1", {}, "quorum").is_ok());  // no v0 yet
  ASSERT_TRUE(l.commit_initial("h0").is_ok());
  EXPECT_TRUE(l.has_initial());
  EXPECT_EQ(l.current_version(), 0);
  EXPECT_EQ(l.current_hash(), "h0");
  auto again = l.commit_initial("other");
  EXPECT_FALSE(again.is_ok());
  EXPECT_NE(again.message().find("already records version 0"), std::string::npos) << again.message();
  ASSERT_EQ(l.rounds().size(), 1u);
  EXPECT_EQ(l.rounds()[0].closed_by, "initial");
}

TEST(Ledger, CommitRoundAppliesUpdatesWithWeightsAndAdvancesTheVersion) {
  TempDir tmp;
  auto l = Ledger::open(tmp.path() / "ledger.sqlite").value();
  ASSERT_TRUE(l.commit_initial("h0").is_ok());
  EXPECT_TRUE(l.record_received(key("paris", 0, 1), 64, 1000).value());
  EXPECT_TRUE(l.record_received(key("toronto", 0, 1), 32, 900).value());
  EXPECT_TRUE(l.record_received(key("zurich", 0, 1), 16, 800).value());
  ASSERT_TRUE(l.commit_round(1, "h1", {{key("paris", 0, 1), 1.0}, {key("toronto", 0, 1), 0.5}}, "quorum").is_ok());
  EXPECT_EQ(l.current_version(), 1);
  EXPECT_EQ(l.current_hash(), "h1");

  auto paris = l.find(key("paris", 0, 1)).value();
  ASSERT_TRUE(paris.has_value());
  EXPECT_EQ(paris->state, UpdateState::kApplied);
  EXPECT_EQ(paris->applied_version, 1);
  EXPECT_EQ(paris->weight, 1.0);
  EXPECT_EQ(paris->n_samples, 64);
  EXPECT_EQ(paris->bytes, 1000);
  EXPECT_GT(paris->received_at, 1.6e9);
  EXPECT_EQ(l.find(key("toronto", 0, 1)).value()->weight, 0.5);
  EXPECT_FALSE(l.find(key("dublin", 0, 1)).value().has_value());

  auto pending = l.pending();
  ASSERT_EQ(pending.size(), 1u);
  EXPECT_EQ(pending[0].key, key("zurich", 0, 1));

  auto rounds = l.rounds();
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_EQ(rounds[1].version, 1);
  EXPECT_EQ(rounds[1].hash, "h1");
  EXPECT_EQ(rounds[1].n_updates, 2);
  EXPECT_EQ(rounds[1].closed_by, "quorum");

  // A round with nothing usable (closed by deadline) still advances.
  ASSERT_TRUE(l.commit_round(2, "h2", {}, "deadline").is_ok());
  EXPECT_EQ(l.current_version(), 2);
}

TEST(Ledger, RecordReceivedIsIdempotent) {
  TempDir tmp;
  auto l = Ledger::open(tmp.path() / "ledger.sqlite").value();
  ASSERT_TRUE(l.commit_initial("h0").is_ok());
  EXPECT_TRUE(l.record_received(key("paris", 0, 7), 64, 1000).value());
  const auto before = snapshot(l);
  EXPECT_FALSE(l.record_received(key("paris", 0, 7), 99, 5).value());  // a retry: nothing changes
  EXPECT_EQ(snapshot(l), before);
  EXPECT_EQ(l.find(key("paris", 0, 7)).value()->n_samples, 64);
  // Also after it was applied: the caller answers with the earlier outcome.
  ASSERT_TRUE(l.commit_round(1, "h1", {{key("paris", 0, 7), 1.0}}, "async").is_ok());
  EXPECT_FALSE(l.record_received(key("paris", 0, 7), 64, 1000).value());
  EXPECT_EQ(l.find(key("paris", 0, 7)).value()->state, UpdateState::kApplied);
  // Another seq or base version is another update.
  EXPECT_TRUE(l.record_received(key("paris", 0, 8), 64, 1000).value());
  EXPECT_TRUE(l.record_received(key("paris", 1, 7), 64, 1000).value());
  EXPECT_FALSE(l.record_received(key("paris", 1, 8), -1, 0).is_ok());
}

TEST(Ledger, CommitRoundRefusesGapsDoubleApplyAndUnknownUpdatesChangingNothing) {
  TempDir tmp;
  auto l = Ledger::open(tmp.path() / "ledger.sqlite").value();
  ASSERT_TRUE(l.commit_initial("h0").is_ok());
  ASSERT_TRUE(l.record_received(key("a", 0, 1), 1, 1).value());
  ASSERT_TRUE(l.record_received(key("b", 0, 1), 1, 1).value());
  ASSERT_TRUE(l.record_received(key("c", 0, 1), 1, 1).value());
  ASSERT_TRUE(l.commit_round(1, "h1", {{key("a", 0, 1), 1.0}}, "quorum").is_ok());
  ASSERT_TRUE(l.mark_rejected(key("c", 0, 1), "too stale").is_ok());
  const auto before = snapshot(l);

  struct Case {
    const char* what;
    int64_t version;
    std::vector<std::pair<UpdateKey, double>> applied;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"gap", 3, {{key("b", 0, 1), 1.0}}, "the next must be 2"},
      {"same version again", 1, {{key("b", 0, 1), 1.0}}, "the next must be 2"},
      {"applied twice", 2, {{key("b", 0, 1), 1.0}, {key("a", 0, 1), 1.0}}, "is applied at version 1"},
      {"listed twice", 2, {{key("b", 0, 1), 1.0}, {key("b", 0, 1), 1.0}}, "listed twice"},
      {"unknown", 2, {{key("b", 0, 1), 1.0}, {key("zz", 0, 1), 1.0}}, "is unknown"},
      {"rejected", 2, {{key("b", 0, 1), 1.0}, {key("c", 0, 1), 1.0}}, "is rejected"},
      {"nan weight", 2, {{key("b", 0, 1), std::nan("")}}, "non-finite weight"},
  };
  for (const auto& c : cases) {
    auto st = l.commit_round(c.version, "hx", c.applied, "quorum");
    EXPECT_FALSE(st.is_ok()) << c.what;
    EXPECT_NE(st.message().find(c.message), std::string::npos) << c.what << ": " << st.message();
    EXPECT_EQ(snapshot(l), before) << c.what << " changed the ledger";
  }
  ASSERT_TRUE(l.commit_round(2, "h2", {{key("b", 0, 1), 0.7}}, "quorum").is_ok());
  EXPECT_EQ(l.find(key("b", 0, 1)).value()->applied_version, 2);
}

TEST(Ledger, MarkRejected) {
  TempDir tmp;
  auto l = Ledger::open(tmp.path() / "ledger.sqlite").value();
  ASSERT_TRUE(l.commit_initial("h0").is_ok());
  ASSERT_TRUE(l.record_received(key("a", 0, 1), 4, 10).value());
  ASSERT_TRUE(l.mark_rejected(key("a", 0, 1), "non-finite value in tensor x").is_ok());
  ASSERT_TRUE(l.mark_rejected(key("a", 0, 1), "second reason").is_ok());
  auto a = l.find(key("a", 0, 1)).value();
  EXPECT_EQ(a->state, UpdateState::kRejected);
  EXPECT_EQ(a->reason, "non-finite value in tensor x");
  EXPECT_EQ(a->n_samples, 4);
  // Rejected before it was ever received: recorded, so a retry gets the same answer.
  ASSERT_TRUE(l.mark_rejected(key("b", 0, 1), "staleness 9 > 4").is_ok());
  EXPECT_EQ(l.find(key("b", 0, 1)).value()->state, UpdateState::kRejected);
  EXPECT_FALSE(l.record_received(key("b", 0, 1), 4, 10).value());
  // An applied update cannot be rejected afterwards.
  ASSERT_TRUE(l.record_received(key("c", 0, 1), 4, 10).value());
  ASSERT_TRUE(l.commit_round(1, "h1", {{key("c", 0, 1), 1.0}}, "quorum").is_ok());
  EXPECT_FALSE(l.mark_rejected(key("c", 0, 1), "late").is_ok());
  EXPECT_TRUE(l.pending().empty());
}

TEST(Ledger, PendingAndHistorySurviveReopenInArrivalOrder) {
  TempDir tmp;
  const auto file = tmp.path() / "ledger.sqlite";
  {
    auto l = Ledger::open(file).value();
    ASSERT_TRUE(l.commit_initial("h0").is_ok());
    for (const char* n : {"toronto", "paris", "dublin", "zurich"}) ASSERT_TRUE(l.record_received(key(n, 0, 1), 8, 8).value());
    ASSERT_TRUE(l.commit_round(1, "h1", {{key("paris", 0, 1), 1.0}}, "quorum").is_ok());
    ASSERT_TRUE(l.node_event("paris", "join", "v0").is_ok());
  }
  auto l = Ledger::open(file).value();
  EXPECT_EQ(l.current_version(), 1);
  EXPECT_EQ(l.current_hash(), "h1");
  auto p = l.pending();
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].key.node, "toronto");
  EXPECT_EQ(p[1].key.node, "dublin");
  EXPECT_EQ(p[2].key.node, "zurich");
  auto events = l.node_events();
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event, "join");
  EXPECT_EQ(events[0].detail, "v0");
}

TEST(Ledger, UpdateKeyStrIsASafeDistinctFileName) {
  EXPECT_EQ(key("paris", 3, 7).str(), "paris.v3.s7");
  EXPECT_EQ(key("../etc/passwd", 0, 1).str(), "%2E%2E%2Fetc%2Fpasswd.v0.s1");
  EXPECT_EQ(key("a b", 1, 2).str(), "a%20b.v1.s2");
  // '.' in a node name is escaped, so these cannot collide.
  EXPECT_NE(key("a.v1", 2, 3).str(), key("a", 1, 0).str());
  EXPECT_EQ(key("a.v1", 2, 3).str(), "a%2Ev1.v2.s3");
}

TEST(Ledger, CorruptFileIsNamed) {
  TempDir tmp;
  const auto file = tmp.path() / "ledger.sqlite";
  std::ofstream(file) << std::string(4096, 'x');
  auto l = Ledger::open(file);
  ASSERT_FALSE(l.is_ok());
  EXPECT_NE(l.status().message().find(file.string()), std::string::npos) << l.status().message();
  EXPECT_EQ(l.status().code(), StatusCode::kDataLoss) << l.status().message();
}

TEST(Ledger, AnotherSchemaVersionIsRefused) {
  TempDir tmp;
  const auto file = tmp.path() / "ledger.sqlite";
  { auto l = Ledger::open(file).value(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE meta SET value = '99' WHERE key = 'schema_version'", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  auto l = Ledger::open(file);
  ASSERT_FALSE(l.is_ok());
  EXPECT_NE(l.status().message().find("schema version 99"), std::string::npos) << l.status().message();
}

}  // namespace
}  // namespace meshrl::store
