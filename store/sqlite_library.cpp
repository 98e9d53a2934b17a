// The SQLite functions opcache uses, forwarded to SQLite loaded on demand
// (see sqlite_library.hpp). Each definition keeps SQLite's own declaration
// from <sqlite3.h>.
#include "store/sqlite_library.hpp"

#include <dlfcn.h>
#include <sqlite3.h>

#include <cstdarg>
#include <mutex>
#include <string>

#include "base/shared_object.hpp"

#ifndef OPCACHE_LIBSQLITE_SONAME
#define OPCACHE_LIBSQLITE_SONAME "libsqlite3.so.0"
#endif

#define OPCACHE_SQLITE_FORWARD __attribute__((visibility("hidden")))

namespace opcache::store {
namespace {

// Every SQLite function opcache calls.
#define OPCACHE_SQLITE_FUNCTIONS(X)                                                                     \
  X(sqlite3_open_v2) X(sqlite3_close_v2) X(sqlite3_errmsg) X(sqlite3_errstr) X(sqlite3_extended_errcode) \
  X(sqlite3_extended_result_codes) X(sqlite3_busy_timeout) X(sqlite3_db_config) X(sqlite3_db_filename)  \
  X(sqlite3_exec) X(sqlite3_free) X(sqlite3_prepare_v3) X(sqlite3_finalize) X(sqlite3_step)              \
  X(sqlite3_reset) X(sqlite3_clear_bindings) X(sqlite3_bind_int64) X(sqlite3_bind_null)                  \
  X(sqlite3_bind_text) X(sqlite3_column_bytes) X(sqlite3_column_int64) X(sqlite3_column_text)           \
  X(sqlite3_column_type) X(sqlite3_changes64) X(sqlite3_wal_hook) X(sqlite3_wal_checkpoint_v2)

/// The resolved entry points; all null until load_sqlite() succeeds.
struct SqliteFunctions {
#define OPCACHE_SQLITE_MEMBER(name) decltype(&::name) name = nullptr;
  OPCACHE_SQLITE_FUNCTIONS(OPCACHE_SQLITE_MEMBER)
#undef OPCACHE_SQLITE_MEMBER
};

SqliteFunctions g_sqlite;

Status load_once() {
  void* library = dlopen(OPCACHE_LIBSQLITE_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = dlerror();
    return Error::io(std::string("the cache index needs SQLite, which could not be loaded (") +
                     (reason ? reason : OPCACHE_LIBSQLITE_SONAME) +
                     "); install it (Debian: apt-get install libsqlite3-0)");
  }
  SqliteFunctions functions;
  std::string missing;
  bool complete = true;
#define OPCACHE_SQLITE_RESOLVE(name) \
  complete = base::resolve_function(library, #name, functions.name, missing) && complete;
  OPCACHE_SQLITE_FUNCTIONS(OPCACHE_SQLITE_RESOLVE)
#undef OPCACHE_SQLITE_RESOLVE
  if (!complete) {
    return Error::io(std::string(OPCACHE_LIBSQLITE_SONAME) + " lacks " + missing + " (SQLite 3.37 or newer is needed)");
  }
  g_sqlite = functions;
  return {};
}

/// load_sqlite() for the forwarding functions: true when the functions are
/// there. Decided once, so a forwarded call costs one check.
bool loaded() noexcept {
  static const bool ok = static_cast<bool>(load_sqlite());
  return ok;
}

}  // namespace

Status load_sqlite() {
  static std::once_flag once;
  static Status outcome;
  std::call_once(once, [] { outcome = load_once(); });
  return outcome;
}

bool sqlite_is_loaded() noexcept { return base::is_mapped(OPCACHE_LIBSQLITE_SONAME); }

}  // namespace opcache::store

using opcache::store::g_sqlite;
using opcache::store::loaded;

extern "C" {

OPCACHE_SQLITE_FORWARD int sqlite3_open_v2(const char* filename, sqlite3** db, int flags, const char* vfs) {
  if (!loaded()) {
    *db = nullptr;
    return SQLITE_CANTOPEN;
  }
  return g_sqlite.sqlite3_open_v2(filename, db, flags, vfs);
}

OPCACHE_SQLITE_FORWARD int sqlite3_close_v2(sqlite3* db) {
  return db == nullptr || !loaded() ? SQLITE_OK : g_sqlite.sqlite3_close_v2(db);
}

OPCACHE_SQLITE_FORWARD const char* sqlite3_errmsg(sqlite3* db) {
  return loaded() ? g_sqlite.sqlite3_errmsg(db) : "SQLite is not loaded";
}

OPCACHE_SQLITE_FORWARD const char* sqlite3_errstr(int code) {
  return loaded() ? g_sqlite.sqlite3_errstr(code) : "SQLite is not loaded";
}

OPCACHE_SQLITE_FORWARD int sqlite3_extended_errcode(sqlite3* db) {
  return loaded() ? g_sqlite.sqlite3_extended_errcode(db) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_extended_result_codes(sqlite3* db, int on) {
  return loaded() ? g_sqlite.sqlite3_extended_result_codes(db, on) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_busy_timeout(sqlite3* db, int ms) {
  return loaded() ? g_sqlite.sqlite3_busy_timeout(db, ms) : SQLITE_ERROR;
}

// The options opcache sets take an int and an int* (SQLITE_DBCONFIG_ENABLE_*,
// NO_CKPT_ON_CLOSE…); MAINDBNAME and LOOKASIDE, which take others, are refused.
OPCACHE_SQLITE_FORWARD int sqlite3_db_config(sqlite3* db, int option, ...) {
  if (!loaded()) return SQLITE_ERROR;
  if (option == SQLITE_DBCONFIG_MAINDBNAME || option == SQLITE_DBCONFIG_LOOKASIDE) return SQLITE_MISUSE;
  va_list arguments;
  va_start(arguments, option);
  const int value = va_arg(arguments, int);
  int* result = va_arg(arguments, int*);
  va_end(arguments);
  return g_sqlite.sqlite3_db_config(db, option, value, result);
}

OPCACHE_SQLITE_FORWARD sqlite3_filename sqlite3_db_filename(sqlite3* db, const char* name) {
  return loaded() ? g_sqlite.sqlite3_db_filename(db, name) : nullptr;
}

OPCACHE_SQLITE_FORWARD int sqlite3_exec(sqlite3* db, const char* sql, int (*callback)(void*, int, char**, char**),
                                        void* argument, char** error) {
  return loaded() ? g_sqlite.sqlite3_exec(db, sql, callback, argument, error) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD void sqlite3_free(void* memory) {
  if (memory != nullptr && loaded()) g_sqlite.sqlite3_free(memory);
}

OPCACHE_SQLITE_FORWARD int sqlite3_prepare_v3(sqlite3* db, const char* sql, int bytes, unsigned int flags,
                                              sqlite3_stmt** statement, const char** tail) {
  if (!loaded()) {
    *statement = nullptr;
    return SQLITE_ERROR;
  }
  return g_sqlite.sqlite3_prepare_v3(db, sql, bytes, flags, statement, tail);
}

OPCACHE_SQLITE_FORWARD int sqlite3_finalize(sqlite3_stmt* statement) {
  return statement == nullptr || !loaded() ? SQLITE_OK : g_sqlite.sqlite3_finalize(statement);
}

OPCACHE_SQLITE_FORWARD int sqlite3_step(sqlite3_stmt* statement) {
  return loaded() ? g_sqlite.sqlite3_step(statement) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_reset(sqlite3_stmt* statement) {
  return loaded() ? g_sqlite.sqlite3_reset(statement) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_clear_bindings(sqlite3_stmt* statement) {
  return loaded() ? g_sqlite.sqlite3_clear_bindings(statement) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_bind_int64(sqlite3_stmt* statement, int index, sqlite3_int64 value) {
  return loaded() ? g_sqlite.sqlite3_bind_int64(statement, index, value) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_bind_null(sqlite3_stmt* statement, int index) {
  return loaded() ? g_sqlite.sqlite3_bind_null(statement, index) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_bind_text(sqlite3_stmt* statement, int index, const char* text, int bytes,
                                             void (*destructor)(void*)) {
  return loaded() ? g_sqlite.sqlite3_bind_text(statement, index, text, bytes, destructor) : SQLITE_ERROR;
}

OPCACHE_SQLITE_FORWARD int sqlite3_column_bytes(sqlite3_stmt* statement, int column) {
  return loaded() ? g_sqlite.sqlite3_column_bytes(statement, column) : 0;
}

OPCACHE_SQLITE_FORWARD sqlite3_int64 sqlite3_column_int64(sqlite3_stmt* statement, int column) {
  return loaded() ? g_sqlite.sqlite3_column_int64(statement, column) : 0;
}

OPCACHE_SQLITE_FORWARD const unsigned char* sqlite3_column_text(sqlite3_stmt* statement, int column) {
  return loaded() ? g_sqlite.sqlite3_column_text(statement, column) : nullptr;
}

OPCACHE_SQLITE_FORWARD int sqlite3_column_type(sqlite3_stmt* statement, int column) {
  return loaded() ? g_sqlite.sqlite3_column_type(statement, column) : SQLITE_NULL;
}

OPCACHE_SQLITE_FORWARD sqlite3_int64 sqlite3_changes64(sqlite3* db) {
  return loaded() ? g_sqlite.sqlite3_changes64(db) : 0;
}

OPCACHE_SQLITE_FORWARD void* sqlite3_wal_hook(sqlite3* db, int (*hook)(void*, sqlite3*, const char*, int),
                                              void* argument) {
  return loaded() ? g_sqlite.sqlite3_wal_hook(db, hook, argument) : nullptr;
}

OPCACHE_SQLITE_FORWARD int sqlite3_wal_checkpoint_v2(sqlite3* db, const char* name, int mode, int* log_frames,
                                                     int* checkpointed_frames) {
  return loaded() ? g_sqlite.sqlite3_wal_checkpoint_v2(db, name, mode, log_frames, checkpointed_frames)
                  : SQLITE_ERROR;
}

}  // extern "C"
