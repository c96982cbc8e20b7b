// /api/state stays small whatever the run's length, and its counters still agree with the ledger:
// a ledger of 20,000 events and 20,000 updates with long (and a few 3 MiB) texts, written straight
// into SQLite in one transaction, against a reference computed from every row.
//   build/tests/test_web --gtest_filter='StateBounds*'
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "mesh/reject_code.h"  // header-only, torch-free: the codes the labels must cover
#include "store/ledger.h"
#include "store/sqlite.h"
#include "support/temp_dir.h"
#include "web/ledger_snapshot.h"
#include "web/state_json.h"
#include "web/version_log.h"

namespace meshrl::web {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kRounds = 1000;
constexpr int kRows = 20000;
const char* const kNodes[] = {"paris", "zurich", "dublin", "toronto", "lima"};
const char* const kReasons[] = {"base version 3 is too old (current 9, max_staleness 2) ", "audit_failed: rewards differ ",
                                "excluded: by audits ", "replay: seq 5 is at or below 9 ", "n_samples must be > 0 "};

// Rows written directly (one transaction, no per-row fsync), the way a long run would leave them.
void fill_ledger(const fs::path& file) {
  auto db = store::sql::Db::open(file, /*create=*/false).value();
  ASSERT_TRUE(db.exec("PRAGMA synchronous=OFF; BEGIN").is_ok());
  auto round = store::sql::Stmt::prepare(db, "INSERT INTO rounds(version, hash, n_updates, closed_by, committed_at) VALUES (?1, ?2, 0, ?3, ?4)").value();
  for (int64_t v = 1; v <= kRounds; ++v) {
    round.reset();
    round.bind(1, v).bind(2, std::string_view("h" + std::to_string(v))).bind(3, std::string_view(v % 3 ? "quorum" : "deadline")).bind(4, 1.0 * v);
    ASSERT_TRUE(round.run().is_ok());
  }
  auto update = store::sql::Stmt::prepare(db, "INSERT INTO updates(node, base_version, seq, state, n_samples, bytes, received_at, "
                                              "applied_version, reason, weight) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 1)").value();
  for (int i = 0; i < kRows; ++i) {
    const int64_t state = i % 7 == 0 ? 2 : i % 11 == 0 ? 0 : 1;
    const int64_t applied = 1 + (i * 7919) % kRounds;
    const int64_t base = std::max<int64_t>(0, applied - 1 - i % 4);
    update.reset();
    update.bind(1, std::string_view(kNodes[i % 5])).bind(2, base).bind(3, int64_t{i}).bind(4, state);
    update.bind(5, int64_t{8 + i % 3}).bind(6, int64_t{1000 + i}).bind(7, 1e9 + i);
    if (state == 1) update.bind(8, applied); else update.bind_null(8);
    update.bind(9, std::string_view(state == 2 ? kReasons[i % 5] + std::string(2000, 'r') : ""));
    ASSERT_TRUE(update.run().is_ok());
  }
  auto event = store::sql::Stmt::prepare(db, "INSERT INTO node_events(node, event, detail, at) VALUES (?1, ?2, ?3, ?4)").value();
  const char* const kinds[] = {"join", "heartbeat_gap", "lease_expired", "rejoin", "leave", "update_rejected"};
  for (int i = 0; i < kRows; ++i) {
    const bool huge = i >= kRows - 3;  // the latest three: 3 MiB device strings, as a node once sent
    event.reset();
    event.bind(1, std::string_view(kNodes[(i / 6) % 5])).bind(2, std::string_view(kinds[(i + i / 30) % 6]));
    event.bind(3, std::string_view(std::string(huge ? 3 << 20 : 1024, 'd') + std::to_string(i))).bind(4, 1e9 + i);
    ASSERT_TRUE(event.run().is_ok());
  }
  event.reset();
  event.bind(1, std::string_view("lima")).bind(2, std::string_view("excluded")).bind(3, std::string_view("audits")).bind(4, 2e9);
  ASSERT_TRUE(event.run().is_ok());
  ASSERT_TRUE(db.exec("COMMIT").is_ok());
}

TEST(StateBounds, AHugeLedgerGivesASmallStateWithTheSameCounters) {
  test_support::TempDir dir;
  const fs::path file = dir.path() / "ledger.sqlite";
  {
    auto created = store::Ledger::open(file).value();
    ASSERT_TRUE(created.commit_initial("h0").is_ok());
  }
  fill_ledger(file);
  if (HasFatalFailure()) return;
  const store::Ledger ledger = store::Ledger::open(file).value();

  std::vector<VersionPoint> points;
  for (int64_t v = 0; v <= kRounds * 5; ++v) {  // a metrics.jsonl longer than the ledger: thinned all the same
    VersionPoint p;
    p.version = v;
    p.closed_by = "quorum";
    if (v % 10 == 0) p.pass_at_1 = 0.001 * static_cast<double>(v % 1000);
    points.push_back(p);
  }
  const RunShape run{"sync", kRounds, 30, 4, 1000};
  const RunSnapshot s = ledger_snapshot(ledger, run, thin_points(points, kVersionsLatest, kVersionsHistory));
  const std::string body = state_json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  // About 120 KiB of versions, 40 events of 3 x 256 bytes, five nodes: far from the ledger's 30 MiB.
  EXPECT_LT(body.size(), 256u << 10) << "bytes of /api/state";
  RecordProperty("state_bytes", static_cast<int>(body.size()));
  EXPECT_LE(s.versions.size(), kVersionsLatest + 2 * kVersionsHistory + 1);
  EXPECT_EQ(s.versions.back().version, kRounds * 5);
  EXPECT_EQ(s.events.size(), static_cast<size_t>(kEventsShown));
  for (const EventView& e : s.events) {
    EXPECT_LE(e.detail.size(), kTextShownBytes);
    EXPECT_LE(e.node.size(), kTextShownBytes);
  }
  EXPECT_EQ(s.events.back().event, "excluded");
  const EventView& huge = s.events[s.events.size() - 2];
  EXPECT_EQ(huge.detail.substr(0, 4), "dddd");
  EXPECT_EQ(huge.detail.substr(huge.detail.size() - 3), "...");

  // The reference: every row read and counted the plain way.
  std::map<std::pair<std::string, std::string>, int64_t> updates;
  std::map<std::string, std::map<std::string, int64_t>> rejected_by_node;
  std::map<std::string, int64_t> applied_by_node;
  std::map<int64_t, int64_t> applied_at;
  int64_t samples = 0, staleness_le_1 = 0, staleness_count = 0;
  double bytes = 0, staleness_sum = 0;
  for (const store::UpdateRow& u : ledger.updates()) {
    bytes += static_cast<double>(u.bytes);
    if (u.state == store::UpdateState::kApplied) {
      ++updates[{"applied", ""}];
      ++applied_by_node[u.key.node];
      ++applied_at[*u.applied_version];
      samples += u.n_samples;
      const int64_t st = *u.applied_version - 1 - u.key.base_version;
      staleness_le_1 += st <= 1;
      staleness_sum += static_cast<double>(st);
      ++staleness_count;
    } else if (u.state == store::UpdateState::kReceived) {
      ++updates[{"pending", ""}];
    } else {
      ++updates[{"rejected", update_reason_class(u.reason)}];
      ++rejected_by_node[u.key.node][update_reason_class(u.reason)];
    }
  }
  EXPECT_EQ(s.updates, updates);
  EXPECT_EQ(updates.size(), 7u);  // applied, pending and the five reason classes
  EXPECT_EQ(s.samples_applied, samples);
  EXPECT_DOUBLE_EQ(s.ledger_update_bytes, bytes);
  EXPECT_EQ(s.staleness_count, staleness_count);
  EXPECT_EQ(s.staleness_bucket_counts[0] + s.staleness_bucket_counts[1], staleness_le_1);
  EXPECT_DOUBLE_EQ(s.staleness_sum, staleness_sum);
  std::map<std::string, int64_t> closed_by;
  for (const store::RoundRow& r : ledger.rounds())
    if (r.version > 0) ++closed_by[r.closed_by];
  EXPECT_EQ(s.rounds_by_closed_by, closed_by);

  // Node states from each node's last membership event, as the rows say.
  std::map<std::string, std::string> state;
  for (const store::NodeEvent& e : ledger.node_events()) {
    if (e.event == "join" || e.event == "rejoin") state[e.node] = "online";
    if (e.event == "leave") state[e.node] = "left";
    if (e.event == "lease_expired") state[e.node] = "dropped";
  }
  state["lima"] = "excluded";
  ASSERT_EQ(s.nodes.size(), 5u);
  for (const NodeView& n : s.nodes) {
    EXPECT_EQ(n.state, state[n.name]) << n.name;
    EXPECT_EQ(n.updates_applied, applied_by_node[n.name]) << n.name;
    EXPECT_EQ(n.rejected_by_reason, rejected_by_node[n.name]) << n.name;
  }

  // The data-parallel bytes of each shown version: every update applied up to it.
  const double per_update = 4 * 2.0 * 4.0 * 1000;
  for (const VersionPoint& p : s.versions) {
    int64_t through = 0;
    for (const auto& [v, k] : applied_at)
      if (v <= p.version) through += k;
    ASSERT_DOUBLE_EQ(p.bytes_dataparallel, static_cast<double>(through) * per_update) << "version " << p.version;
  }
}

TEST(StateBounds, ThinPointsKeepsTheLatestTheShapeAndTheLastEvaluation) {
  std::vector<VersionPoint> points(1000);
  for (size_t i = 0; i < points.size(); ++i) points[i].version = static_cast<int64_t>(i);
  points[3].pass_at_1 = 0.5;
  EXPECT_EQ(thin_points(points, 10, 990).size(), 1000u);  // fits: unchanged
  const auto thin = thin_points(points, 10, 20);
  // 990 earlier points at stride 64: versions 0, 64, ..., 960 (16 of them); the last 10; the evaluation.
  ASSERT_EQ(thin.size(), 16u + 10u + 1u);
  EXPECT_EQ(thin[0].version, 0);
  EXPECT_EQ(thin[1].version, 3);
  EXPECT_EQ(thin[2].version, 64);
  EXPECT_EQ(thin.back().version, 999);
  EXPECT_EQ(thin[thin.size() - 10].version, 990);
  // The next version moves no older point: the kept ones stay the same from one poll to the next.
  points.push_back(VersionPoint{});
  points.back().version = 1000;
  const auto next = thin_points(points, 10, 20);
  EXPECT_EQ(next[2].version, 64);
}

TEST(StateBounds, ReasonsClassByTheirTypedCodeThenByTheirWords) {
  EXPECT_EQ(update_reason_class("rate_limited: 6 updates in a minute, 5 allowed"), "rate_limited");
  EXPECT_EQ(update_reason_class("superseded: a fresher update of paris (the run finished)"), "superseded");
  EXPECT_EQ(update_reason_class("finished: the run ended at version 4"), "run_finished");
  EXPECT_EQ(update_reason_class("the run finished at version 4"), "run_finished");
  EXPECT_EQ(update_reason_class("base version 1 is too old"), "stale");
  EXPECT_EQ(update_reason_class("replay without a colon"), "invalid_payload");
  EXPECT_EQ(update_reason_class(""), "invalid_payload");
}

// The labels are a fixed list of the coordinator's codes: every code must have its own (a new
// code added to mesh/reject_code.h and not here fails this test, not a dashboard).
TEST(StateBounds, EveryRejectCodeHasItsOwnLabel) {
  for (int c = 0; c <= static_cast<int>(mesh::kLastRejectCode); ++c) {
    const std::string code = mesh::reject_code_name(static_cast<mesh::RejectCode>(c));
    const std::string label = update_reason_class(code + ": detail");
    EXPECT_TRUE(label == code || (code == "finished" && label == "run_finished")) << code << " -> " << label;
  }
}

TEST(StateBounds, BoundedTextCutsOnACharacterAndMarksTheCut) {
  EXPECT_EQ(bounded_text("short", 8), "short");
  EXPECT_EQ(bounded_text("abcdefghij", 8), "abcde...");
  // "é" is two bytes: a cut after 5 bytes would split the third one.
  EXPECT_EQ(bounded_text("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8), "\xc3\xa9\xc3\xa9...");
  EXPECT_EQ(bounded_text(std::string(1000, 'x')).size(), kTextShownBytes);
}

}  // namespace
}  // namespace meshrl::web
