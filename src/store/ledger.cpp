#include "store/ledger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "store/sqlite.h"

namespace meshrl::store {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

template <typename T>
T or_throw(Result<T> r) {
  if (!r.is_ok()) throw StatusError(r.status());
  return std::move(r).value();
}

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS updates(
  arrival INTEGER PRIMARY KEY AUTOINCREMENT,
  node TEXT NOT NULL, base_version INTEGER NOT NULL, seq INTEGER NOT NULL,
  state INTEGER NOT NULL, n_samples INTEGER NOT NULL, bytes INTEGER NOT NULL, received_at REAL NOT NULL,
  applied_version INTEGER, reason TEXT NOT NULL DEFAULT '', weight REAL NOT NULL DEFAULT 0,
  UNIQUE(node, base_version, seq));
CREATE INDEX IF NOT EXISTS updates_by_state ON updates(state, arrival);
CREATE TABLE IF NOT EXISTS rounds(
  version INTEGER PRIMARY KEY, hash TEXT NOT NULL, n_updates INTEGER NOT NULL,
  closed_by TEXT NOT NULL, committed_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS node_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT, node TEXT NOT NULL, event TEXT NOT NULL,
  detail TEXT NOT NULL, at REAL NOT NULL);
)sql";

// A macro so that queries are single string literals (GCC 12 warns falsely on std::string + here).
#define MESHRL_UPDATE_COLUMNS \
  "node, base_version, seq, state, n_samples, bytes, received_at, applied_version, reason, weight"

std::string key_text(const UpdateKey& k) {
  return "update (" + k.node + ", base " + std::to_string(k.base_version) + ", seq " + std::to_string(k.seq) + ")";
}

}  // namespace

const char* update_state_name(UpdateState s) {
  switch (s) {
    case UpdateState::kReceived: return "received";
    case UpdateState::kApplied: return "applied";
    case UpdateState::kRejected: return "rejected";
  }
  return "?";
}

std::string UpdateKey::str() const {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : node) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (plain) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + ".v" + std::to_string(base_version) + ".s" + std::to_string(seq);
}

struct Ledger::Impl {
  std::filesystem::path file;
  sql::Db db;
  mutable std::mutex mu;

  Result<std::vector<UpdateRow>> select_updates(const std::string& where) const {
    std::string query = "SELECT " MESHRL_UPDATE_COLUMNS " FROM updates ";
    query += where;
    query += " ORDER BY arrival";
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, query));
    std::vector<UpdateRow> rows;
    while (true) {
      MESHRL_ASSIGN_OR_RETURN(bool has, st.step());
      if (!has) break;
      MESHRL_ASSIGN_OR_RETURN(auto row, read_update(st));
      rows.push_back(std::move(row));
    }
    return rows;
  }

  Result<UpdateRow> read_update(const sql::Stmt& st) const {
    UpdateRow r;
    r.key = {st.col_text(0), st.col_int(1), st.col_int(2)};
    const int64_t state = st.col_int(3);
    if (state < 0 || state > 2)
      return data_loss("[ledger] " + file.string() + ": " + key_text(r.key) + " has unknown state " +
                       std::to_string(state));
    r.state = static_cast<UpdateState>(state);
    r.n_samples = st.col_int(4);
    r.bytes = st.col_int(5);
    r.received_at = st.col_double(6);
    if (!st.col_null(7)) r.applied_version = st.col_int(7);
    r.reason = st.col_text(8);
    r.weight = st.col_double(9);
    return r;
  }

  Result<std::optional<UpdateRow>> find(const UpdateKey& k) const {
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "SELECT " MESHRL_UPDATE_COLUMNS
                                                            " FROM updates WHERE node = ?1 AND base_version = ?2 AND seq = ?3"));
    st.bind(1, std::string_view(k.node)).bind(2, k.base_version).bind(3, k.seq);
    MESHRL_ASSIGN_OR_RETURN(bool has, st.step());
    if (!has) return std::optional<UpdateRow>();
    MESHRL_ASSIGN_OR_RETURN(auto row, read_update(st));
    return std::optional<UpdateRow>(std::move(row));
  }

  // (has_initial, current version, its hash)
  struct Head {
    bool has_initial = false;
    int64_t version = 0;
    std::string hash;
  };
  Result<Head> head() const {
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "SELECT version, hash FROM rounds ORDER BY version DESC LIMIT 1"));
    MESHRL_ASSIGN_OR_RETURN(bool has, st.step());
    Head h;
    if (has) {
      h.has_initial = true;
      h.version = st.col_int(0);
      h.hash = st.col_text(1);
    }
    return h;
  }
};

Ledger::Ledger(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Ledger::Ledger(Ledger&&) noexcept = default;
Ledger& Ledger::operator=(Ledger&&) noexcept = default;
Ledger::~Ledger() = default;

const std::filesystem::path& Ledger::file() const { return impl_->file; }

Result<Ledger> Ledger::open(const std::filesystem::path& file) {
  auto impl = std::make_unique<Impl>();
  impl->file = file;
  MESHRL_ASSIGN_OR_RETURN(impl->db, sql::Db::open(file, /*create=*/true));
  auto& db = impl->db;
  // journal_mode is the first statement that reads the file: a non-SQLite file fails here.
  MESHRL_RETURN_IF_ERROR(db.exec("PRAGMA journal_mode=WAL"));
  MESHRL_RETURN_IF_ERROR(db.exec("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON; PRAGMA busy_timeout=10000"));
  {
    MESHRL_ASSIGN_OR_RETURN(auto tx, sql::Transaction::begin(db));
    MESHRL_RETURN_IF_ERROR(db.exec(kSchema));
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "SELECT value FROM meta WHERE key = 'schema_version'"));
    MESHRL_ASSIGN_OR_RETURN(bool has, st.step());
    if (has) {
      const std::string v = st.col_text(0);
      if (v != std::to_string(kLedgerSchemaVersion))
        return invalid_argument("[ledger] " + file.string() + " has schema version " + v + ", this meshrl reads " +
                                std::to_string(kLedgerSchemaVersion) + "; use the meshrl that wrote it");
    } else {
      MESHRL_ASSIGN_OR_RETURN(auto ins, sql::Stmt::prepare(db, "INSERT INTO meta(key, value) VALUES ('schema_version', ?1)"));
      ins.bind(1, std::string_view(std::to_string(kLedgerSchemaVersion)));
      MESHRL_RETURN_IF_ERROR(ins.run());
    }
    MESHRL_RETURN_IF_ERROR(tx.commit());
  }
  return Ledger(std::move(impl));
}

Status Ledger::node_event(const std::string& node, const std::string& event, const std::string& detail) {
  std::lock_guard lock(impl_->mu);
  MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(impl_->db, "INSERT INTO node_events(node, event, detail, at) VALUES (?1, ?2, ?3, ?4)"));
  st.bind(1, std::string_view(node)).bind(2, std::string_view(event)).bind(3, std::string_view(detail)).bind(4, now_s());
  return st.run();
}

Result<std::optional<int64_t>> Ledger::last_accepted_seq(const std::string& node) const {
  std::lock_guard lock(impl_->mu);
  MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(impl_->db, "SELECT MAX(seq) FROM updates WHERE node = ?1 AND state != ?2"));
  st.bind(1, std::string_view(node)).bind(2, static_cast<int64_t>(UpdateState::kRejected));
  MESHRL_ASSIGN_OR_RETURN(bool has, st.step());
  if (!has || st.col_null(0)) return std::optional<int64_t>();
  return std::optional<int64_t>(st.col_int(0));
}

std::vector<NodeEvent> Ledger::node_events() const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT node, event, detail, at FROM node_events ORDER BY id"));
  std::vector<NodeEvent> out;
  while (or_throw(st.step())) out.push_back({st.col_text(0), st.col_text(1), st.col_text(2), st.col_double(3)});
  return out;
}

Result<bool> Ledger::record_received(const UpdateKey& k, int64_t n_samples, int64_t bytes) {
  if (n_samples < 0 || bytes < 0)
    return invalid_argument("[ledger] " + key_text(k) + ": n_samples and bytes must be >= 0, got " +
                            std::to_string(n_samples) + " and " + std::to_string(bytes));
  std::lock_guard lock(impl_->mu);
  MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(impl_->db,
                                                      "INSERT OR IGNORE INTO updates(node, base_version, seq, state, "
                                                      "n_samples, bytes, received_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"));
  st.bind(1, std::string_view(k.node)).bind(2, k.base_version).bind(3, k.seq);
  st.bind(4, static_cast<int64_t>(UpdateState::kReceived)).bind(5, n_samples).bind(6, bytes).bind(7, now_s());
  MESHRL_RETURN_IF_ERROR(st.run());
  return impl_->db.changes() == 1;
}

Result<std::optional<UpdateRow>> Ledger::find(const UpdateKey& k) const {
  std::lock_guard lock(impl_->mu);
  return impl_->find(k);
}

Status Ledger::mark_rejected(const UpdateKey& k, const std::string& reason) {
  std::lock_guard lock(impl_->mu);
  auto& db = impl_->db;
  MESHRL_ASSIGN_OR_RETURN(auto tx, sql::Transaction::begin(db));
  MESHRL_ASSIGN_OR_RETURN(auto row, impl_->find(k));
  if (row && row->state == UpdateState::kRejected) return Status::ok();  // first reason kept
  if (row && row->state == UpdateState::kApplied)
    return invalid_argument("[ledger] cannot reject " + key_text(k) + ": already applied at version " +
                            std::to_string(row->applied_version.value_or(-1)));
  if (row) {
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "UPDATE updates SET state = ?1, reason = ?2 WHERE node = ?3 "
                                                            "AND base_version = ?4 AND seq = ?5"));
    st.bind(1, static_cast<int64_t>(UpdateState::kRejected)).bind(2, std::string_view(reason));
    st.bind(3, std::string_view(k.node)).bind(4, k.base_version).bind(5, k.seq);
    MESHRL_RETURN_IF_ERROR(st.run());
  } else {
    MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "INSERT INTO updates(node, base_version, seq, state, n_samples, "
                                                            "bytes, received_at, reason) VALUES (?1, ?2, ?3, ?4, 0, 0, ?5, ?6)"));
    st.bind(1, std::string_view(k.node)).bind(2, k.base_version).bind(3, k.seq);
    st.bind(4, static_cast<int64_t>(UpdateState::kRejected)).bind(5, now_s()).bind(6, std::string_view(reason));
    MESHRL_RETURN_IF_ERROR(st.run());
  }
  return tx.commit();
}

std::vector<UpdateRow> Ledger::pending() const {
  std::lock_guard lock(impl_->mu);
  return or_throw(impl_->select_updates("WHERE state = " + std::to_string(static_cast<int>(UpdateState::kReceived))));
}

std::vector<UpdateRow> Ledger::updates() const {
  std::lock_guard lock(impl_->mu);
  return or_throw(impl_->select_updates(""));
}

Status Ledger::commit_round(int64_t new_version, const std::string& hash,
                            const std::vector<std::pair<UpdateKey, double>>& applied_with_weight,
                            const std::string& closed_by) {
  const std::string where = "[ledger] commit_round v" + std::to_string(new_version) + ": ";
  if (hash.empty()) return invalid_argument(where + "empty hash");
  for (const auto& [k, w] : applied_with_weight)
    if (!std::isfinite(w)) return invalid_argument(where + key_text(k) + " has a non-finite weight");
  std::lock_guard lock(impl_->mu);
  auto& db = impl_->db;
  MESHRL_ASSIGN_OR_RETURN(auto tx, sql::Transaction::begin(db));
  MESHRL_ASSIGN_OR_RETURN(auto head, impl_->head());
  if (!head.has_initial) return invalid_argument(where + "no version 0 recorded; call commit_initial first");
  if (new_version != head.version + 1)
    return invalid_argument(where + "the current version is " + std::to_string(head.version) + ", so the next must be " +
                            std::to_string(head.version + 1));
  MESHRL_ASSIGN_OR_RETURN(auto st, sql::Stmt::prepare(db, "UPDATE updates SET state = ?1, applied_version = ?2, weight = ?3 "
                                                          "WHERE node = ?4 AND base_version = ?5 AND seq = ?6 AND state = ?7"));
  for (const auto& [k, w] : applied_with_weight) {
    // Only a kReceived row matches, so an update applied earlier, rejected, or listed twice changes
    // nothing here and the whole transaction is rolled back below.
    st.reset();
    st.bind(1, static_cast<int64_t>(UpdateState::kApplied)).bind(2, new_version).bind(3, w);
    st.bind(4, std::string_view(k.node)).bind(5, k.base_version).bind(6, k.seq);
    st.bind(7, static_cast<int64_t>(UpdateState::kReceived));
    MESHRL_RETURN_IF_ERROR(st.run());
    if (db.changes() != 1) {
      MESHRL_ASSIGN_OR_RETURN(auto row, impl_->find(k));
      std::string why;
      if (!row) {
        why = "is unknown (never recorded as received)";
      } else if (row->applied_version == new_version) {
        why = "is listed twice";
      } else {
        why = std::string("is ") + update_state_name(row->state) +
              (row->applied_version ? " at version " + std::to_string(*row->applied_version) : "") + ", not received";
      }
      return invalid_argument(where + key_text(k) + " " + why + "; nothing was committed");
    }
  }
  MESHRL_ASSIGN_OR_RETURN(auto ins, sql::Stmt::prepare(db, "INSERT INTO rounds(version, hash, n_updates, closed_by, committed_at) "
                                                           "VALUES (?1, ?2, ?3, ?4, ?5)"));
  ins.bind(1, new_version).bind(2, std::string_view(hash)).bind(3, static_cast<int64_t>(applied_with_weight.size()));
  ins.bind(4, std::string_view(closed_by)).bind(5, now_s());
  MESHRL_RETURN_IF_ERROR(ins.run());
  return tx.commit();
}

Status Ledger::commit_initial(const std::string& hash) {
  if (hash.empty()) return invalid_argument("[ledger] commit_initial: empty hash");
  std::lock_guard lock(impl_->mu);
  auto& db = impl_->db;
  MESHRL_ASSIGN_OR_RETURN(auto tx, sql::Transaction::begin(db));
  MESHRL_ASSIGN_OR_RETURN(auto head, impl_->head());
  if (head.has_initial)
    return invalid_argument("[ledger] commit_initial: " + impl_->file.string() + " already records version " +
                            std::to_string(head.version) + " (resume the run instead of starting it again)");
  MESHRL_ASSIGN_OR_RETURN(auto ins, sql::Stmt::prepare(db, "INSERT INTO rounds(version, hash, n_updates, closed_by, committed_at) "
                                                           "VALUES (0, ?1, 0, 'initial', ?2)"));
  ins.bind(1, std::string_view(hash)).bind(2, now_s());
  MESHRL_RETURN_IF_ERROR(ins.run());
  return tx.commit();
}

bool Ledger::has_initial() const {
  std::lock_guard lock(impl_->mu);
  return or_throw(impl_->head()).has_initial;
}

int64_t Ledger::current_version() const {
  std::lock_guard lock(impl_->mu);
  return or_throw(impl_->head()).version;
}

std::string Ledger::current_hash() const {
  std::lock_guard lock(impl_->mu);
  return or_throw(impl_->head()).hash;
}

std::vector<RoundRow> Ledger::rounds() const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT version, hash, n_updates, closed_by, committed_at FROM rounds ORDER BY version"));
  std::vector<RoundRow> out;
  while (or_throw(st.step()))
    out.push_back({st.col_int(0), st.col_text(1), st.col_int(2), st.col_text(3), st.col_double(4)});
  return out;
}

std::vector<Ledger::UpdateTally> Ledger::update_tallies(const ReasonClasses& classes) const {
  // The class is computed in SQL (CASE over bound texts), so that rows group by it and free-text
  // reasons never leave the database one by one.
  std::string cls = "CASE WHEN state != " + std::to_string(static_cast<int>(UpdateState::kRejected)) + " THEN ''";
  int param = 0;
  for (const ReasonRule& r : classes.rules) {
    const std::string text = "?" + std::to_string(++param);
    const std::string label = "?" + std::to_string(++param);
    cls += r.prefix ? " WHEN substr(reason, 1, length(" + text + ")) = " + text : " WHEN instr(reason, " + text + ") > 0";
    cls += " THEN " + label;
  }
  cls += " ELSE ?" + std::to_string(++param) + " END";
  std::string query = "SELECT node, state, ";
  query += cls;
  query += " AS cls, COUNT(*), TOTAL(n_samples), TOTAL(bytes), MAX(received_at) FROM updates "
           "GROUP BY node, state, cls ORDER BY node, state, cls";
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, query));
  param = 0;
  for (const ReasonRule& r : classes.rules) {
    st.bind(++param, std::string_view(r.text));
    st.bind(++param, std::string_view(r.label));
  }
  st.bind(++param, std::string_view(classes.otherwise));
  std::vector<UpdateTally> out;
  while (or_throw(st.step())) {
    UpdateTally t;
    t.node = st.col_text(0);
    const int64_t state = st.col_int(1);
    if (state < 0 || state > 2)
      throw StatusError(data_loss("[ledger] " + impl_->file.string() + ": updates of " + t.node + " have unknown state " +
                                  std::to_string(state)));
    t.state = static_cast<UpdateState>(state);
    t.reason_class = st.col_text(2);
    t.count = st.col_int(3);
    t.n_samples = st.col_double(4);
    t.bytes = st.col_double(5);
    t.last_received_at = st.col_double(6);
    out.push_back(std::move(t));
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> Ledger::applied_staleness_counts() const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT applied_version - 1 - base_version AS s, COUNT(*) FROM updates "
                                                   "WHERE state = ?1 GROUP BY s ORDER BY s"));
  st.bind(1, static_cast<int64_t>(UpdateState::kApplied));
  std::vector<std::pair<int64_t, int64_t>> out;
  while (or_throw(st.step())) out.emplace_back(st.col_int(0), st.col_int(1));
  return out;
}

std::vector<int64_t> Ledger::applied_through(const std::vector<int64_t>& versions) const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT applied_version, COUNT(*) FROM updates WHERE state = ?1 "
                                                   "GROUP BY applied_version ORDER BY applied_version"));
  st.bind(1, static_cast<int64_t>(UpdateState::kApplied));
  std::vector<int64_t> out(versions.size(), 0);
  int64_t applied = 0;
  size_t i = 0;
  while (or_throw(st.step())) {
    const int64_t v = st.col_int(0);
    for (; i < versions.size() && versions[i] < v; ++i) out[i] = applied;
    applied += st.col_int(1);
  }
  for (; i < versions.size(); ++i) out[i] = applied;
  return out;
}

std::vector<std::pair<std::string, int64_t>> Ledger::rounds_by_closed_by() const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT closed_by, COUNT(*) FROM rounds WHERE version > 0 "
                                                   "GROUP BY closed_by ORDER BY closed_by"));
  std::vector<std::pair<std::string, int64_t>> out;
  while (or_throw(st.step())) out.emplace_back(st.col_text(0), st.col_int(1));
  return out;
}

std::vector<NodeEvent> Ledger::latest_node_events(int64_t n, int64_t max_chars) const {
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, "SELECT substr(node, 1, ?1), substr(event, 1, ?1), substr(detail, 1, ?1), at "
                                                   "FROM node_events ORDER BY id DESC LIMIT ?2"));
  st.bind(1, max_chars).bind(2, n);
  std::vector<NodeEvent> out;
  while (or_throw(st.step())) out.push_back({st.col_text(0), st.col_text(1), st.col_text(2), st.col_double(3)});
  std::reverse(out.begin(), out.end());
  return out;
}

std::vector<NodeEvent> Ledger::latest_event_per_node(const std::vector<std::string>& events) const {
  if (events.empty()) return {};
  std::string in;
  for (size_t i = 0; i < events.size(); ++i) in += (i ? ", ?" : "?") + std::to_string(i + 1);
  std::string query = "SELECT e.node, e.event, e.at FROM node_events e JOIN (SELECT MAX(id) AS id FROM node_events WHERE event IN (";
  query += in;
  query += ") GROUP BY node) latest ON e.id = latest.id ORDER BY e.node";
  std::lock_guard lock(impl_->mu);
  auto st = or_throw(sql::Stmt::prepare(impl_->db, query));
  for (size_t i = 0; i < events.size(); ++i) st.bind(static_cast<int>(i + 1), std::string_view(events[i]));
  std::vector<NodeEvent> out;
  while (or_throw(st.step())) out.push_back({st.col_text(0), st.col_text(1), "", st.col_double(2)});
  return out;
}

}  // namespace meshrl::store
