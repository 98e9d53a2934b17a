#include "store/sqlite.hpp"

#include <algorithm>
#include <chrono>
#include <thread>

#include "base/try.hpp"
#include "store/sqlite_library.hpp"

namespace opcache::store {

Error sqlite_error(int rc, const std::string& message) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Error::timeout(message + " (the index is locked by another process for too long)");
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Error::corrupt(message + " (run `opcache verify --repair`, or remove the index to rebuild it)");
    default:
      return Error::io(message);
  }
}

void Statement::note_bind(int rc) {
  if (rc != SQLITE_OK && m_bind_error == SQLITE_OK) {
    m_bind_error = rc;
  }
}

void Statement::prepare_if_pending() {
  if (m_stmt || m_pending_sql.empty()) {
    return;
  }
  sqlite3_stmt* stmt = nullptr;
  const int rc = sqlite3_prepare_v3(m_db, m_pending_sql.c_str(), static_cast<int>(m_pending_sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    note_bind(rc);
    m_prepare_error = std::string("cannot prepare statement: ") + sqlite3_errmsg(m_db);
    return;
  }
  m_stmt.reset(stmt);
  m_pending_sql.clear();
}

Statement& Statement::bind(int index, std::int64_t value) {
  prepare_if_pending();
  note_bind(sqlite3_bind_int64(m_stmt.get(), index, value));
  return *this;
}

Statement& Statement::bind(int index, std::string_view value) {
  prepare_if_pending();
  note_bind(sqlite3_bind_text(m_stmt.get(), index, value.data(), static_cast<int>(value.size()), SQLITE_TRANSIENT));
  return *this;
}

Statement& Statement::bind_null(int index) {
  prepare_if_pending();
  note_bind(sqlite3_bind_null(m_stmt.get(), index));
  return *this;
}

Result<bool> Statement::step() {
  prepare_if_pending();
  if (!m_prepare_error.empty()) {
    return sqlite_error(m_bind_error, m_prepare_error);  // stays unusable: the SQL itself is wrong
  }
  if (m_bind_error != SQLITE_OK) {
    int rc = m_bind_error;
    m_bind_error = SQLITE_OK;
    return sqlite_error(rc, std::string("SQLite bind failed: ") + sqlite3_errstr(rc));
  }
  int rc = sqlite3_step(m_stmt.get());
  if (rc == SQLITE_ROW) {
    return true;
  }
  if (rc == SQLITE_DONE) {
    return false;
  }
  const char* file = sqlite3_db_filename(m_db, "main");
  return sqlite_error(rc, std::string("index ") + (file ? file : "?") + ": " + sqlite3_errmsg(m_db));
}

Status Statement::run() {
  for (;;) {
    OPCACHE_TRY_ASSIGN(bool row, step());
    if (!row) {
      return {};
    }
  }
}

void Statement::reset() noexcept {
  if (!m_stmt) {
    return;  // deferred and not prepared yet: nothing to reset
  }
  sqlite3_reset(m_stmt.get());
  sqlite3_clear_bindings(m_stmt.get());
  m_bind_error = SQLITE_OK;
}

std::int64_t Statement::column_int64(int index) const { return sqlite3_column_int64(m_stmt.get(), index); }

std::string Statement::column_text(int index) const {
  const auto* text = sqlite3_column_text(m_stmt.get(), index);
  int size = sqlite3_column_bytes(m_stmt.get(), index);
  return text ? std::string(reinterpret_cast<const char*>(text), static_cast<std::size_t>(size)) : std::string();
}

bool Statement::column_is_null(int index) const { return sqlite3_column_type(m_stmt.get(), index) == SQLITE_NULL; }

Result<Database> Database::open(const std::filesystem::path& path, int busy_timeout_ms,
                                LockWaitObserver on_lock_wait) {
  OPCACHE_TRY(load_sqlite());  // loaded on first use: a hit never needs it (store/sqlite_library.hpp)
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  Database db(raw, path, busy_timeout_ms, std::move(on_lock_wait));  // owns raw even on failure
  if (rc != SQLITE_OK) {
    return sqlite_error(rc, "cannot open index " + path.string() + ": " +
                                (raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc)));
  }
  sqlite3_busy_timeout(raw, busy_timeout_ms);
  sqlite3_extended_result_codes(raw, 1);
  return db;
}

Status Database::enable_wal() {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(m_busy_timeout_ms);
  auto sleep = std::chrono::milliseconds(2);
  for (;;) {
    OPCACHE_TRY_ASSIGN(Statement statement, prepare("PRAGMA journal_mode"));
    OPCACHE_TRY_ASSIGN(bool row, statement.step());
    if (row && statement.column_text(0) == "wal") {
      return {};
    }
    statement = Statement();
    char* message = nullptr;
    int rc = sqlite3_exec(m_db.get(), "PRAGMA journal_mode=WAL", nullptr, nullptr, &message);
    sqlite3_free(message);
    if (rc == SQLITE_OK) {
      continue;  // read the mode back
    }
    if ((rc & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline) {
      return last_error("index " + m_path.string() + ": cannot switch to WAL mode");
    }
    if (m_on_lock_wait) {
      m_on_lock_wait();
    }
    std::this_thread::sleep_for(sleep);
    sleep = std::min(sleep * 2, std::chrono::milliseconds(50));
  }
}

int Database::truncate_long_wal(void*, sqlite3* db, const char* schema, int frames) {
  if (frames >= k_wal_truncate_frames) {
    // SQLITE_BUSY (a reader in the way) only postpones it to a later commit.
    (void)sqlite3_wal_checkpoint_v2(db, schema, SQLITE_CHECKPOINT_TRUNCATE, nullptr, nullptr);
  }
  return SQLITE_OK;
}

Status Database::configure() {
  OPCACHE_TRY(enable_wal());
  // Commits are durable when they return (FULL syncs the WAL at each commit);
  // statistics opt out with DeferredSync. The last connection to close does
  // not checkpoint: that would sync the WAL and the database file on every
  // short-lived process (one `opcache get` = one hit); checkpoints run when the
  // WAL grows past its limit instead, and the WAL stays valid between processes.
  if (sqlite3_db_config(m_db.get(), SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, nullptr) != SQLITE_OK) {
    return last_error("index " + m_path.string() + ": cannot configure checkpoints");
  }
  OPCACHE_TRY(exec("PRAGMA synchronous=FULL"));
  // Every process that opens the index first rebuilds the WAL index by
  // reading every valid frame of the WAL (SQLite's recovery). SQLite's own
  // automatic checkpoints never restart the WAL when each process is the only
  // connection (recovery forgets what was checkpointed), so the WAL grew
  // without bound and every `opcache exec` hit read all of it (callgrind:
  // 1.9 M of a hit's 6.9 M instructions at 800 KB, and rising). Instead, a
  // commit that leaves k_wal_truncate_frames or more frames checkpoints and
  // truncates the WAL: the next process reads at most that many frames.
  sqlite3_wal_hook(m_db.get(), &Database::truncate_long_wal, nullptr);
  // Reads through a memory map, not one pread per page: a lookup in a large
  // index (10^6 entries, 650 MB) then costs no system call once the pages
  // are in the page cache (200k entries: lookup p99 112 -> 18 us).
  OPCACHE_TRY(exec("PRAGMA mmap_size=1073741824"));
  return exec("PRAGMA foreign_keys=ON");
}

DeferredSync::DeferredSync(Database& db) : m_db(db) {
  // A failure only costs the sync it meant to save.
  (void)m_db.exec("PRAGMA synchronous=NORMAL");
}

DeferredSync::~DeferredSync() { (void)m_db.exec("PRAGMA synchronous=FULL"); }

Status Database::exec(const std::string& sql) {
  char* message = nullptr;
  int rc = sqlite3_exec(m_db.get(), sql.c_str(), nullptr, nullptr, &message);
  if (rc != SQLITE_OK) {
    std::string text = message ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return sqlite_error(rc, "index " + m_path.string() + ": " + text);
  }
  return {};
}

Result<Statement> Database::prepare(const std::string& sql) {
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(m_db.get(), sql.c_str(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt,
                              nullptr);
  if (rc != SQLITE_OK) {
    return sqlite_error(rc, "index " + m_path.string() + ": cannot prepare statement: " + sqlite3_errmsg(m_db.get()));
  }
  return Statement(m_db.get(), stmt);
}

Result<Statement> Database::prepare_deferred(const std::string& sql) { return Statement(m_db.get(), sql); }

std::int64_t Database::changes() const { return sqlite3_changes64(m_db.get()); }

Error Database::last_error(const std::string& what) const {
  return sqlite_error(sqlite3_extended_errcode(m_db.get()), what + ": " + sqlite3_errmsg(m_db.get()));
}

Result<Transaction> Transaction::begin(Database& db) {
  OPCACHE_TRY(db.exec("BEGIN IMMEDIATE"));
  return Transaction(db);
}

Transaction::~Transaction() {
  if (m_db != nullptr) {
    (void)m_db->exec("ROLLBACK");
  }
}

Status Transaction::commit() {
  if (m_db == nullptr) {
    return Error::internal("transaction committed twice");
  }
  Database* db = m_db;
  m_db = nullptr;
  auto status = db->exec("COMMIT");
  if (!status) {
    (void)db->exec("ROLLBACK");
  }
  return status;
}

}  // namespace opcache::store
