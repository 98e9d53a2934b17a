// Thin owning wrappers over SQLite (Chromium sql/, Nix SQLite): one
// connection, prepared statements with typed bind/column helpers, and
// transactions that roll back unless committed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "opcache/result.hpp"

namespace opcache::store {

/// A prepared statement. Move-only; finalized on destruction. Bind errors are
/// remembered and reported by the next step(). A deferred statement
/// (Database::prepare_deferred) is prepared on first use; a failure to
/// prepare it is reported by that step().
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* stmt) : m_db(db), m_stmt(stmt, &sqlite3_finalize) {}
  /// A statement of `sql` on `db`, prepared when first bound or stepped.
  Statement(sqlite3* db, std::string sql) : m_db(db), m_pending_sql(std::move(sql)) {}

  /// Binds 1-based parameter `index`.
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, std::string_view value);
  Statement& bind_null(int index);
  /// Binds parameters 1, 2, … in order to `values` (integers or text).
  template <typename... Values>
  Statement& bind_all(const Values&... values) {
    int index = 0;
    (bind(++index, values), ...);
    return *this;
  }

  /// Runs one step: true when a row is available, false when done.
  Result<bool> step();
  /// Steps until done, for statements that return no rows.
  Status run();
  /// Resets for re-execution and clears bindings; never fails.
  void reset() noexcept;
  /// Prepares a deferred statement now, for a caller with time to spare
  /// before its first use; a failure is left for that use (step()).
  void prepare() { prepare_if_pending(); }

  std::int64_t column_int64(int index) const;
  std::string column_text(int index) const;
  bool column_is_null(int index) const;

 private:
  void note_bind(int rc);
  // Prepares a deferred statement; a failure is remembered for step().
  void prepare_if_pending();

  sqlite3* m_db = nullptr;
  std::unique_ptr<sqlite3_stmt, decltype(&sqlite3_finalize)> m_stmt{nullptr, &sqlite3_finalize};
  int m_bind_error = SQLITE_OK;
  std::string m_pending_sql;    ///< SQL of a deferred statement not prepared yet
  std::string m_prepare_error;  ///< why preparing it failed
};

/// Called when a connection finds the file locked by another one and waits
/// to try again (configure()'s switch to WAL): the event a test of that wait
/// releases the other connection's lock on, instead of sleeping.
using LockWaitObserver = std::function<void()>;

/// One SQLite connection. Move-only; closed on destruction. Not thread-safe:
/// callers serialize access (the store holds a mutex).
class Database {
 public:
  /// Opens (creating if needed) with a busy timeout and extended result codes.
  /// Changes nothing in the file: call configure() once it is known to be ours.
  static Result<Database> open(const std::filesystem::path& path, int busy_timeout_ms,
                               LockWaitObserver on_lock_wait = {});

  /// Switches to WAL (retrying while another process holds a lock, up to the
  /// busy timeout: SQLite does not apply the busy handler to this switch),
  /// sets synchronous=FULL and foreign keys, reads through a memory map of up
  /// to 1 GiB, and keeps the WAL short: a commit that leaves
  /// k_wal_truncate_frames or more frames in it checkpoints and truncates it,
  /// so several short-lived processes can share the file cheaply.
  Status configure();

  /// WAL length (frames of one page) at which a commit truncates the WAL.
  static constexpr int k_wal_truncate_frames = 64;

  Status exec(const std::string& sql);
  Result<Statement> prepare(const std::string& sql);
  /// Like prepare(), but the statement is prepared on first use: a process
  /// that never runs it never pays for parsing it. Errors in `sql` surface at
  /// the first step(). (A Result only to read like prepare(); never fails.)
  Result<Statement> prepare_deferred(const std::string& sql);
  std::int64_t changes() const;
  const std::filesystem::path& path() const noexcept { return m_path; }

  /// The current error of the connection as an Error (busy → timeout,
  /// corrupt → corrupt, else io), prefixed with `what`.
  Error last_error(const std::string& what) const;

 private:
  Database(sqlite3* db, std::filesystem::path path, int busy_timeout_ms, LockWaitObserver on_lock_wait)
      : m_db(db, &sqlite3_close_v2),
        m_path(std::move(path)),
        m_busy_timeout_ms(busy_timeout_ms),
        m_on_lock_wait(std::move(on_lock_wait)) {}
  Status enable_wal();
  // sqlite3_wal_hook callback: checkpoint (TRUNCATE) when `frames` is long.
  static int truncate_long_wal(void* unused, sqlite3* db, const char* schema, int frames);

  std::unique_ptr<sqlite3, decltype(&sqlite3_close_v2)> m_db{nullptr, &sqlite3_close_v2};
  std::filesystem::path m_path;
  int m_busy_timeout_ms = 0;
  LockWaitObserver m_on_lock_wait;  // may be empty
};

/// While alive, commits on `db` are not synced to disk (PRAGMA
/// synchronous=NORMAL in WAL mode): for statistics — hit counts, access
/// times, counters — whose last few updates may be lost on a power cut
/// without harm. A crash still leaves the database consistent (WAL frames
/// are checksummed; a torn tail is ignored). Every other commit is synced
/// (synchronous=FULL). Not nestable; one per connection at a time.
class DeferredSync {
 public:
  explicit DeferredSync(Database& db);
  DeferredSync(const DeferredSync&) = delete;
  DeferredSync& operator=(const DeferredSync&) = delete;
  ~DeferredSync();

 private:
  Database& m_db;
};

/// BEGIN IMMEDIATE … COMMIT; rolls back in the destructor unless committed.
class Transaction {
 public:
  static Result<Transaction> begin(Database& db);
  Transaction(Transaction&& other) noexcept : m_db(other.m_db) { other.m_db = nullptr; }
  Transaction& operator=(Transaction&&) = delete;
  ~Transaction();

  Status commit();

 private:
  explicit Transaction(Database& db) : m_db(&db) {}
  Database* m_db;
};

/// Maps an SQLite result code to an Error.
Error sqlite_error(int rc, const std::string& message);

}  // namespace opcache::store
