// The coordinator's ledger: one SQLite file (RUN_DIR/ledger.sqlite) that says which policy version
// is current, which updates arrived and what became of each (applied at version v with weight w,
// or rejected with a reason), which rounds closed and how, and what nodes did. It is the single
// source of truth after a crash: a version folder counts only once commit_round has recorded it.
// Owns the SQLite connection; knows nothing about tensors, codecs or the network.
//
// Durability: WAL journal, synchronous=FULL, every mutation one transaction, so a mutation that
// returned ok survives a power cut and one interrupted half-way leaves no trace.
// Exactly once: an update is keyed by (node, base_version, seq) (the run is the ledger's own); the
// key is UNIQUE, and commit_round moves an update from kReceived to kApplied only once.
// Thread-safe: one mutex serialises every call (SQLite transactions on one connection must not
// interleave).
//
// Schema (version kLedgerSchemaVersion; another version is refused):
//   meta(key PRIMARY KEY, value)                      schema_version, current_version
//   updates(arrival PK AUTOINCREMENT, node, base_version, seq, state, n_samples, bytes, received_at,
//           applied_version NULL, reason, weight, UNIQUE(node, base_version, seq))
//   rounds(version PK, hash, n_updates, closed_by, committed_at)      v0: closed_by "initial"
//   node_events(id PK AUTOINCREMENT, node, event, detail, at)
// Times are Unix seconds (double).
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace meshrl::store {

inline constexpr int64_t kLedgerSchemaVersion = 1;

enum class UpdateState { kReceived = 0, kApplied = 1, kRejected = 2 };
const char* update_state_name(UpdateState s);  // "received", "applied", "rejected"

struct UpdateKey {
  std::string node;
  int64_t base_version = 0;
  int64_t seq = 0;

  // "<node>.v<base_version>.s<seq>", with every node byte outside [A-Za-z0-9_-] written %XX, so it
  // is a safe file name (no '/', no leading '.') and distinct keys give distinct strings.
  std::string str() const;
  friend bool operator==(const UpdateKey&, const UpdateKey&) = default;
};

struct UpdateRow {
  UpdateKey key;
  UpdateState state = UpdateState::kReceived;
  int64_t n_samples = 0;
  int64_t bytes = 0;
  double received_at = 0;
  std::optional<int64_t> applied_version;  // set when kApplied
  std::string reason;                      // set when kRejected
  double weight = 0;                       // set when kApplied
};

struct RoundRow {
  int64_t version = 0;
  std::string hash;
  int64_t n_updates = 0;
  std::string closed_by;  // "initial" (v0), "quorum", "deadline", "async"
  double committed_at = 0;
};

struct NodeEvent {
  std::string node;
  std::string event;
  std::string detail;
  double at = 0;
};

class Ledger {
 public:
  // Opens (creating the file and tables when missing) and checks the schema version. Fails
  // naming the file when it is not a SQLite database, is corrupt, or has another schema version.
  static Result<Ledger> open(const std::filesystem::path& file);

  Ledger(Ledger&&) noexcept;
  Ledger& operator=(Ledger&&) noexcept;
  ~Ledger();

  const std::filesystem::path& file() const;

  // Nodes: join / leave / lease_expired / rejoin / ...; a free-form audit trail.
  Status node_event(const std::string& node, const std::string& event, const std::string& detail);
  std::vector<NodeEvent> node_events() const;

  // Records a new update as kReceived. Returns false and changes nothing when the key is already
  // known (whatever its state): the caller answers the node with the earlier outcome (find), so
  // retries are idempotent. Spool the payload (RunStore::spool_update) BEFORE calling this, so
  // that a kReceived row always has its bytes on disk.
  Result<bool> record_received(const UpdateKey& k, int64_t n_samples, int64_t bytes);
  Result<std::optional<UpdateRow>> find(const UpdateKey& k) const;
  // The highest seq of the updates accepted from `node` (received or applied; rejected ones do not
  // count, so one refused wild seq locks nobody out), or nullopt: the coordinator refuses a new
  // update at or below it as a replay, also across restarts.
  Result<std::optional<int64_t>> last_accepted_seq(const std::string& node) const;

  // kReceived -> kRejected with the reason. An unknown key is recorded directly as kRejected (an
  // update refused before it was received, e.g. too stale), so a retry gets the same answer.
  // Already kRejected: ok, the first reason is kept. kApplied: fails (kInvalidArgument).
  Status mark_rejected(const UpdateKey& k, const std::string& reason);

  // kReceived updates in arrival order: what a resumed coordinator re-aggregates.
  std::vector<UpdateRow> pending() const;

  // One transaction: the given updates become kApplied at new_version with their weights, a rounds
  // row is added, and current_version becomes new_version. Fails (kInvalidArgument) changing
  // nothing when commit_initial has not run, new_version != current_version() + 1, a weight is not
  // finite, or an update is unknown or not kReceived (so never applied twice, also when listed
  // twice). An empty list is allowed (a round closed by deadline with nothing usable).
  Status commit_round(int64_t new_version, const std::string& hash,
                      const std::vector<std::pair<UpdateKey, double>>& applied_with_weight,
                      const std::string& closed_by);

  // Records version 0 (the initial weights' hash). Fails when any version is already recorded.
  Status commit_initial(const std::string& hash);

  bool has_initial() const;          // commit_initial has run
  int64_t current_version() const;  // 0 for a fresh run and after commit_initial
  std::string current_hash() const;  // "" before commit_initial

  std::vector<UpdateRow> updates() const;  // all, in arrival order (tests and reports)
  std::vector<RoundRow> rounds() const;    // by version

  // Aggregates for the dashboard and reports, computed in SQL: what they return grows with the
  // number of nodes, never with the number of rows, however long the run.

  // Rejected updates by class: each reason (free text) is named by the first rule whose `text`
  // starts it (prefix) or occurs in it (!prefix), or by `otherwise`.
  struct ReasonRule {
    std::string text;
    bool prefix = false;
    std::string label;
  };
  struct ReasonClasses {
    std::vector<ReasonRule> rules;
    std::string otherwise;
  };
  // One group of update rows with the same node, state and reason class ("" unless rejected). The
  // sums are doubles (SQLite's TOTAL) so that node-claimed values can never overflow them.
  struct UpdateTally {
    std::string node;
    UpdateState state = UpdateState::kReceived;
    std::string reason_class;
    int64_t count = 0;
    double n_samples = 0;
    double bytes = 0;
    double last_received_at = 0;  // the latest row's
  };
  std::vector<UpdateTally> update_tallies(const ReasonClasses& classes) const;
  // Applied updates by staleness (applied_version - 1 - base_version): (staleness, count), ascending.
  std::vector<std::pair<int64_t, int64_t>> applied_staleness_counts() const;
  // For each of `versions` (ascending), how many updates were applied at or before it.
  std::vector<int64_t> applied_through(const std::vector<int64_t>& versions) const;
  // Rounds committed after version 0, counted by closed_by.
  std::vector<std::pair<std::string, int64_t>> rounds_by_closed_by() const;
  // The latest `n` node events, oldest first, each text cut in SQL to at most max_chars characters
  // (so a huge detail is never read out whole).
  std::vector<NodeEvent> latest_node_events(int64_t n, int64_t max_chars) const;
  // Each node's latest event among `events` (detail left empty), by node name.
  std::vector<NodeEvent> latest_event_per_node(const std::vector<std::string>& events) const;

  // Read queries return values, not Results: a read failing on an open, checked database is an I/O
  // fault of the machine, reported by throwing StatusError (status.h) with the file named.

 private:
  struct Impl;
  explicit Ledger(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace meshrl::store
