// A tiny RAII layer over SQLite's C API: a connection, prepared statements with typed binds and
// columns, and errors as Status naming the database file. Nothing else (no ORM, no pooling).
// Knows nothing about the ledger's tables.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace meshrl::store::sql {

class Db {
 public:
  // Opens read-write; creates the file only when `create` is set.
  static Result<Db> open(const std::filesystem::path& file, bool create);

  sqlite3* get() const { return db_.get(); }
  const std::string& file() const { return file_; }

  // Runs one or more statements without results (DDL, PRAGMA, BEGIN/COMMIT).
  Status exec(std::string_view sql);
  // An error Status naming the file, `what` and SQLite's message for `rc`.
  Status error(std::string_view what, int rc) const;
  int64_t changes() const { return sqlite3_changes64(db_.get()); }

 private:
  struct Close {
    void operator()(sqlite3* db) const { sqlite3_close_v2(db); }
  };
  std::unique_ptr<sqlite3, Close> db_;
  std::string file_;
};

class Stmt {
 public:
  static Result<Stmt> prepare(const Db& db, std::string_view sql);

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, double v);
  Stmt& bind(int i, std::string_view v);
  Stmt& bind_null(int i);
  Stmt& bind(int i, const std::optional<int64_t>& v) { return v ? bind(i, *v) : bind_null(i); }

  // SQLITE_ROW -> true, SQLITE_DONE -> false, otherwise an error naming the file and the statement.
  Result<bool> step();
  // Ready to bind and step again (bindings cleared).
  Stmt& reset();
  // step() expecting SQLITE_DONE.
  Status run();

  int64_t col_int(int i) const { return sqlite3_column_int64(stmt_.get(), i); }
  double col_double(int i) const { return sqlite3_column_double(stmt_.get(), i); }
  std::string col_text(int i) const;
  bool col_null(int i) const { return sqlite3_column_type(stmt_.get(), i) == SQLITE_NULL; }

 private:
  struct Finalize {
    void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
  };
  const Db* db_ = nullptr;
  std::unique_ptr<sqlite3_stmt, Finalize> stmt_;
  std::string sql_;
  int bind_rc_ = SQLITE_OK;  // first bind failure, reported by step()
};

// BEGIN IMMEDIATE on construction (takes the write lock up front, so two writers never deadlock
// half-way); ROLLBACK on destruction unless commit() succeeded.
class Transaction {
 public:
  static Result<Transaction> begin(Db& db);
  Transaction(Transaction&& o) noexcept : db_(o.db_) { o.db_ = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();
  Status commit();

 private:
  explicit Transaction(Db* db) : db_(db) {}
  Db* db_;
};

}  // namespace meshrl::store::sql
