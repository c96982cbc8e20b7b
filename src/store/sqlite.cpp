#include "store/sqlite.h"

namespace meshrl::store::sql {

Result<Db> Db::open(const std::filesystem::path& file, bool create) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  int rc = sqlite3_open_v2(file.c_str(), &raw, flags, nullptr);
  Db db;
  db.db_.reset(raw);  // closed on every path, also when open failed
  db.file_ = file.string();
  if (rc != SQLITE_OK) return db.error("cannot open", rc);
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

Status Db::exec(std::string_view sql) {
  const std::string s(sql);
  char* msg = nullptr;
  int rc = sqlite3_exec(db_.get(), s.c_str(), nullptr, nullptr, &msg);
  if (rc == SQLITE_OK) return Status::ok();
  std::string m = msg ? msg : sqlite3_errstr(rc);
  sqlite3_free(msg);
  return {rc == SQLITE_NOTADB || rc == SQLITE_CORRUPT ? StatusCode::kDataLoss : StatusCode::kIoError,
          "[ledger] " + file_ + ": `" + s.substr(0, 60) + "` failed: " + m};
}

Status Db::error(std::string_view what, int rc) const {
  std::string m = db_ ? sqlite3_errmsg(db_.get()) : sqlite3_errstr(rc);
  const int primary = rc & 0xff;
  StatusCode code = primary == SQLITE_NOTADB || primary == SQLITE_CORRUPT ? StatusCode::kDataLoss
                    : primary == SQLITE_CANTOPEN                          ? StatusCode::kNotFound
                                                                          : StatusCode::kIoError;
  return {code, "[ledger] " + file_ + ": " + std::string(what) + ": " + m};
}

Result<Stmt> Stmt::prepare(const Db& db, std::string_view sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db.get(), sql.data(), static_cast<int>(sql.size()), &raw, nullptr);
  Stmt s;
  s.stmt_.reset(raw);
  s.db_ = &db;
  s.sql_ = std::string(sql);
  if (rc != SQLITE_OK) return db.error("cannot prepare `" + s.sql_.substr(0, 60) + "`", rc);
  return s;
}

Stmt& Stmt::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(stmt_.get(), i, v);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  int rc = sqlite3_bind_double(stmt_.get(), i, v);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  int rc = sqlite3_bind_text64(stmt_.get(), i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}
Stmt& Stmt::bind_null(int i) {
  int rc = sqlite3_bind_null(stmt_.get(), i);
  if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
  return *this;
}

Stmt& Stmt::reset() {
  sqlite3_reset(stmt_.get());
  sqlite3_clear_bindings(stmt_.get());
  bind_rc_ = SQLITE_OK;
  return *this;
}

Result<bool> Stmt::step() {
  if (bind_rc_ != SQLITE_OK) return db_->error("bind in `" + sql_.substr(0, 60) + "`", bind_rc_);
  int rc = sqlite3_step(stmt_.get());
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->error("`" + sql_.substr(0, 60) + "`", rc);
}

Status Stmt::run() {
  MESHRL_ASSIGN_OR_RETURN(bool row, step());
  (void)row;
  return Status::ok();
}

std::string Stmt::col_text(int i) const {
  const auto* p = sqlite3_column_text(stmt_.get(), i);
  int n = sqlite3_column_bytes(stmt_.get(), i);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

Result<Transaction> Transaction::begin(Db& db) {
  MESHRL_RETURN_IF_ERROR(db.exec("BEGIN IMMEDIATE"));
  return Transaction(&db);
}

Transaction::~Transaction() {
  if (db_) (void)db_->exec("ROLLBACK");
}

Status Transaction::commit() {
  MESHRL_RETURN_IF_ERROR(db_->exec("COMMIT"));
  db_ = nullptr;
  return Status::ok();
}

}  // namespace meshrl::store::sql
