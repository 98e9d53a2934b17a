// SQLite, loaded when the index is first used rather than when the process
// starts. A cache hit reads no index (store/key_table, store/hit_journal), and
// linking SQLite into `opcache` made every hit map libm too (Debian's SQLite
// has the SQL math functions): loading libm alone costs a small process 11 %
// of its time, and a hit is a small process.
//
// sqlite_library.cpp defines the SQLite functions opcache calls (with hidden
// visibility, so nothing is exported from libopcache.so); each forwards to the
// real function, resolved from `libsqlite3.so.N` (the soname found at build
// time) on first use. store/sqlite.cpp calls SQLite as usual; `load_sqlite()`
// is where a missing library becomes a clear error. Where libsqlite3.so is
// linked anyway (libopcache.so, the tests) dlopen returns that same copy.
#pragma once

#include "opcache/result.hpp"

namespace opcache::store {

/// Loads SQLite and resolves every function opcache uses, once per process
/// (thread-safe; later calls return the first outcome). An `io` error names
/// the library and the loader's message when it is missing or lacks a
/// function. Until it succeeds the forwarding functions fail as SQLite does
/// (SQLITE_ERROR, SQLITE_CANTOPEN, nullptr).
Status load_sqlite();

/// True when SQLite is mapped into this process (by load_sqlite() or by
/// anything else). For tests and diagnostics.
bool sqlite_is_loaded() noexcept;

}  // namespace opcache::store
