// The SQLite index of a local store (store/index.hpp).
#include <doctest/doctest.h>

#include <sqlite3.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "store/index.hpp"
#include "tests/support/gate.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::ErrorCode;
using opcache::store::Index;
using opcache::store::IndexEntry;
using opcache::store::k_index_schema_version;
using opcache::store::ListFilter;
namespace fs = std::filesystem;

namespace {

// "OPCA", the application_id that marks an opcache index.
constexpr std::int64_t k_opcache_application_id = 0x4f504341;

Index open_index(const fs::path& path) {
  auto index = Index::open(path, 5000);
  REQUIRE_MESSAGE(index.ok(), (index.ok() ? "" : index.error().message()));
  return std::move(index).value();
}

std::int64_t pragma(Index& index, const std::string& name) {
  auto statement = index.database().prepare("PRAGMA " + name);
  REQUIRE(statement.ok());
  auto row = statement->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  return statement->column_int64(0);
}

// Runs SQL on a database file with the plain sqlite3 C API (as a foreign program would).
void raw_sql(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, message);
}

std::int64_t raw_query_int(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
  std::int64_t value = -1;
  if (sqlite3_step(statement) == SQLITE_ROW) {
    value = sqlite3_column_int64(statement, 0);
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

std::string raw_query_text(const fs::path& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) == SQLITE_OK);
  sqlite3_stmt* statement = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &statement, nullptr) == SQLITE_OK);
  std::string value;
  if (sqlite3_step(statement) == SQLITE_ROW && sqlite3_column_text(statement, 0) != nullptr) {
    value = reinterpret_cast<const char*>(sqlite3_column_text(statement, 0));
  }
  sqlite3_finalize(statement);
  sqlite3_close(db);
  return value;
}

std::string hex_key(char fill, int suffix = 0) {
  std::string key(64, fill);
  std::string tail = std::to_string(suffix);
  key.replace(64 - tail.size(), tail.size(), tail);
  return key;
}

IndexEntry make_entry(const std::string& key, const std::string& digest, const std::string& op_type = "MatMul",
                      const std::string& device_mode = "single", const std::string& phase = "train",
                      const std::string& toolchain = "8.0.RC2", const std::string& soc = "Ascend910B1") {
  IndexEntry entry;
  entry.key = key;
  entry.digest = digest;
  entry.bundle_size = 1000;
  entry.raw_size = 4000;
  entry.op_type = op_type;
  entry.device_mode = device_mode;
  entry.phase = phase;
  entry.toolchain = toolchain;
  entry.soc = soc;
  entry.scenario = R"({"device_mode":")" + device_mode + R"(","phase":")" + phase + R"(","soc":")" + soc +
                   R"(","toolchain":")" + toolchain + R"("})";
  entry.created_ms = 1700000000000;
  entry.last_access_ms = 1700000000500;
  entry.build_ms = 2500;
  entry.hits = 0;
  entry.pinned = false;
  return entry;
}

void check_same(const IndexEntry& actual, const IndexEntry& expected) {
  CHECK(actual.key == expected.key);
  CHECK(actual.digest == expected.digest);
  CHECK(actual.bundle_size == expected.bundle_size);
  CHECK(actual.raw_size == expected.raw_size);
  CHECK(actual.op_type == expected.op_type);
  CHECK(actual.device_mode == expected.device_mode);
  CHECK(actual.phase == expected.phase);
  CHECK(actual.toolchain == expected.toolchain);
  CHECK(actual.soc == expected.soc);
  CHECK(actual.scenario == expected.scenario);
  CHECK(actual.created_ms == expected.created_ms);
  CHECK(actual.last_access_ms == expected.last_access_ms);
  CHECK(actual.build_ms == expected.build_ms);
  CHECK(actual.hits == expected.hits);
  CHECK(actual.pinned == expected.pinned);
}

std::vector<std::string> keys_of(const std::vector<IndexEntry>& entries) {
  std::vector<std::string> keys;
  for (const auto& entry : entries) {
    keys.push_back(entry.key);
  }
  return keys;
}

std::vector<std::string> list_keys(Index& index, const ListFilter& filter) {
  auto listed = index.list(filter);
  REQUIRE_MESSAGE(listed.ok(), (listed.ok() ? "" : listed.error().message()));
  return keys_of(*listed);
}

}  // namespace

TEST_CASE("store::Index creates the schema with user_version and application_id") {
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  Index index = open_index(path);
  CHECK(pragma(index, "user_version") == k_index_schema_version);
  CHECK(pragma(index, "application_id") == k_opcache_application_id);
  CHECK(raw_query_int(path, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='entries'") == 1);
  CHECK(raw_query_int(path, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='counters'") == 1);
  CHECK(raw_query_int(path, "PRAGMA user_version") == k_index_schema_version);
}

TEST_CASE("store::Index reopens an existing index idempotently and keeps its rows") {
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  auto entry = make_entry(hex_key('a'), hex_key('d'));
  {
    Index index = open_index(path);
    REQUIRE(index.upsert(entry).ok());
    REQUIRE(index.add_counter("hits", 3).ok());
  }
  for (int round = 0; round < 2; ++round) {
    Index index = open_index(path);
    CHECK(pragma(index, "user_version") == k_index_schema_version);
    CHECK(pragma(index, "application_id") == k_opcache_application_id);
    auto found = index.lookup(entry.key);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    check_same(**found, entry);
    auto counters = index.counters();
    REQUIRE(counters.ok());
    CHECK(counters->at("hits") == 3);
  }
  // Two connections on one file at once (two processes sharing a store).
  Index first = open_index(path);
  Index second = open_index(path);
  REQUIRE(first.upsert(make_entry(hex_key('b'), hex_key('e'))).ok());
  auto seen = second.lookup(hex_key('b'));
  REQUIRE(seen.ok());
  CHECK(seen->has_value());
}

TEST_CASE("store::Index::open waits for another connection's write lock on a fresh index instead of failing") {
  // Another process has just created index.db and holds its write lock (as
  // the first of several ranks does while it sets the index up). Opening must
  // wait for it, within the busy timeout, not fail at once. The lock is
  // released only once opening has found it taken and waits: the order is
  // certain, whatever the machine's speed.
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr) == SQLITE_OK);
  std::atomic<int> lock_waits{0};
  opcache::test::Gate waiting;  // opening waits for the lock, or has returned
  std::thread releaser([&] {
    // A minute only catches a hang: opening that fails at once opens the gate too.
    (void)waiting.wait(std::chrono::seconds(60));
    sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  });
  auto opened = Index::open(path, 60000, [&] {
    ++lock_waits;
    waiting.open();
  });
  waiting.open();
  releaser.join();
  sqlite3_close(other);
  CHECK_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
  CHECK(lock_waits >= 1);  // it did find the lock taken, and waited
  if (opened.ok()) {
    CHECK(pragma(*opened, "user_version") == k_index_schema_version);
  }
}

TEST_CASE("store::Index refuses an index with a newer schema version, naming the file") {
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  {
    Index index = open_index(path);
  }
  raw_sql(path, "PRAGMA user_version=" + std::to_string(k_index_schema_version + 1));
  auto reopened = Index::open(path, 5000);
  REQUIRE_FALSE(reopened.ok());
  CHECK(reopened.error().code() == ErrorCode::usage);
  CHECK(reopened.error().message().find("newer") != std::string::npos);
  CHECK(reopened.error().message().find(path.string()) != std::string::npos);
  // Refusing must not touch the file.
  CHECK(raw_query_int(path, "PRAGMA user_version") == k_index_schema_version + 1);
}

TEST_CASE("store::Index refuses a foreign SQLite database and leaves it untouched") {
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  SUBCASE("a database with someone else's tables") {
    raw_sql(path, "CREATE TABLE photos (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO photos VALUES (1, 'cat');");
    auto opened = Index::open(path, 5000);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().code() == ErrorCode::usage);
    CHECK(opened.error().message().find(path.string()) != std::string::npos);
    CHECK(raw_query_int(path, "SELECT count(*) FROM photos") == 1);
    CHECK(raw_query_int(path, "SELECT count(*) FROM sqlite_master WHERE name='entries'") == 0);
    CHECK(raw_query_int(path, "PRAGMA user_version") == 0);
    CHECK(raw_query_int(path, "PRAGMA application_id") == 0);
    // Not even the journal mode may change: opcache must not convert someone
    // else's database to WAL just by looking at it.
    CHECK(raw_query_text(path, "PRAGMA journal_mode") == "delete");
    CHECK_FALSE(fs::exists(path.string() + "-wal"));
  }
  SUBCASE("an empty database with another application_id") {
    raw_sql(path, "PRAGMA application_id=12345");
    auto opened = Index::open(path, 5000);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().code() == ErrorCode::usage);
    CHECK(opened.error().message().find("not an opcache index") != std::string::npos);
    CHECK(raw_query_int(path, "PRAGMA application_id") == 12345);
    CHECK(raw_query_int(path, "SELECT count(*) FROM sqlite_master") == 0);
  }
  SUBCASE("a file that is not SQLite at all") {
    const std::string garbage(8192, 'x');
    opcache::test::write_text(path, garbage);
    auto opened = Index::open(path, 5000);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().message().find(path.string()) != std::string::npos);
    CHECK(opcache::test::read_text(path) == garbage);
  }
}

TEST_CASE("store::Index upsert stores every column and replaces the row of the same key") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto entry = make_entry(hex_key('a'), hex_key('d'));
  entry.hits = 7;
  entry.pinned = true;
  REQUIRE(index.upsert(entry).ok());
  auto found = index.lookup(entry.key);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  check_same(**found, entry);

  auto replacement = make_entry(entry.key, hex_key('e'), "Conv2D", "multi", "infer", "7.0.0", "Ascend310P3");
  replacement.bundle_size = 55;
  REQUIRE(index.upsert(replacement).ok());
  found = index.lookup(entry.key);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  check_same(**found, replacement);
  auto totals = index.totals();
  REQUIRE(totals.ok());
  CHECK(totals->entries == 1);

  auto missing = index.lookup(hex_key('f'));
  REQUIRE(missing.ok());
  CHECK_FALSE(missing->has_value());
}

TEST_CASE("store::Index insert adds a key's first row with its sizes counted and refuses a key that has one") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto entry = make_entry(hex_key('a'), hex_key('d'));
  entry.bundle_size = 300;
  entry.pinned = true;
  REQUIRE(index.insert(entry).ok());
  auto found = index.lookup(entry.key);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  check_same(**found, entry);
  CHECK(*index.counter_value(opcache::store::counter::store_entries) == 1);
  CHECK(*index.counter_value(opcache::store::counter::store_bytes) == 300);
  // Not an upsert: the row of the key stays as it was, and so do the sizes.
  auto second = make_entry(entry.key, hex_key('e'));
  auto refused = index.insert(second);
  CHECK_FALSE(refused.ok());
  found = index.lookup(entry.key);
  REQUIRE(found.ok());
  REQUIRE(found->has_value());
  CHECK((*found)->digest == entry.digest);
  CHECK(*index.counter_value(opcache::store::counter::store_entries) == 1);
  CHECK(*index.counter_value(opcache::store::counter::store_bytes) == 300);
}

TEST_CASE("store::Index remove deletes rows, with only_if_digest only when the row still points there") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto a = make_entry(hex_key('a'), hex_key('d'));
  auto b = make_entry(hex_key('b'), hex_key('d'));
  REQUIRE(index.upsert(a).ok());
  REQUIRE(index.upsert(b).ok());

  auto removed = index.remove(a.key, hex_key('e'));  // digest mismatch: kept
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);
  CHECK(index.lookup(a.key)->has_value());

  removed = index.remove(a.key, a.digest);
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK_FALSE(index.lookup(a.key)->has_value());

  removed = index.remove(a.key);  // already gone
  REQUIRE(removed.ok());
  CHECK_FALSE(*removed);

  removed = index.remove(b.key);  // unconditional
  REQUIRE(removed.ok());
  CHECK(*removed);
  CHECK(index.totals()->entries == 0);
}

TEST_CASE("store::Index digest_referenced is true while any row points at the digest") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  const std::string shared = hex_key('d');
  REQUIRE(index.upsert(make_entry(hex_key('a'), shared)).ok());
  REQUIRE(index.upsert(make_entry(hex_key('b'), shared)).ok());
  CHECK(*index.digest_referenced(shared));
  CHECK_FALSE(*index.digest_referenced(hex_key('e')));
  REQUIRE(index.remove(hex_key('a')).ok());
  CHECK(*index.digest_referenced(shared));
  REQUIRE(index.remove(hex_key('b')).ok());
  CHECK_FALSE(*index.digest_referenced(shared));
}

TEST_CASE("store::Index record_hits counts hits and moves the access time forward only when asked") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto entry = make_entry(hex_key('a'), hex_key('d'));
  entry.last_access_ms = 5000;
  REQUIRE(index.upsert(entry).ok());

  REQUIRE(index.record_hits(entry.key, 1, 9000, true).ok());
  auto found = index.lookup(entry.key);
  CHECK((*found)->hits == 1);
  CHECK((*found)->last_access_ms == 9000);

  // An older clock reading never moves the access time backwards.
  REQUIRE(index.record_hits(entry.key, 1, 7000, true).ok());
  found = index.lookup(entry.key);
  CHECK((*found)->hits == 2);
  CHECK((*found)->last_access_ms == 9000);

  // Aging disabled: hits still count, the access time stays.
  REQUIRE(index.record_hits(entry.key, 1, 20000, false).ok());
  found = index.lookup(entry.key);
  CHECK((*found)->hits == 3);

  // A batch of hits adds its count at once.
  REQUIRE(index.record_hits(entry.key, 5, 8000, true).ok());
  found = index.lookup(entry.key);
  CHECK((*found)->hits == 8);
  CHECK((*found)->last_access_ms == 9000);
  CHECK((*found)->last_access_ms == 9000);

  // A hit on a key without a row changes nothing and creates no row.
  REQUIRE(index.record_hits(hex_key('b'), 1, 20000, true).ok());
  CHECK_FALSE(index.lookup(hex_key('b'))->has_value());
  CHECK(index.totals()->entries == 1);
}

TEST_CASE("store::Index counters accumulate per name and persist") {
  opcache::test::TempDir temp;
  auto path = temp / "index.db";
  {
    Index index = open_index(path);
    auto fresh = index.counters();
    REQUIRE(fresh.ok());
    CHECK(fresh->count("hits") == 0);
    CHECK(*index.counter_value("hits") == 0);
    REQUIRE(index.add_counter(opcache::store::counter::hits, 1).ok());
    REQUIRE(index.add_counter(opcache::store::counter::hits, 1).ok());
    REQUIRE(index.add_counter(opcache::store::counter::bytes_stored, 1000).ok());
    REQUIRE(index.add_counter(opcache::store::counter::bytes_stored, 234).ok());
    REQUIRE(index.add_counter(opcache::store::counter::saved_ms, 50).ok());
    REQUIRE(index.add_counter(opcache::store::counter::saved_ms, -20).ok());
  }
  Index index = open_index(path);
  auto counters = index.counters();
  REQUIRE(counters.ok());
  CHECK(counters->at("hits") == 2);
  CHECK(*index.counter_value("hits") == 2);
  CHECK(counters->at("bytes_stored") == 1234);
  CHECK(counters->at("compile_ms_saved") == 30);
  CHECK(counters->count("misses") == 0);
}

TEST_CASE("store::Index totals sum sizes and count pinned entries") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto totals = index.totals();
  REQUIRE(totals.ok());
  CHECK(totals->entries == 0);
  CHECK(totals->bundle_bytes == 0);
  CHECK(totals->raw_bytes == 0);
  CHECK(totals->pinned == 0);

  for (int i = 1; i <= 3; ++i) {
    auto entry = make_entry(hex_key('a', i), hex_key('d', i));
    entry.bundle_size = 100 * i;
    entry.raw_size = 1000 * i;
    entry.pinned = i == 2;
    REQUIRE(index.upsert(entry).ok());
  }
  totals = index.totals();
  REQUIRE(totals.ok());
  CHECK(totals->entries == 3);
  CHECK(totals->bundle_bytes == 600);
  CHECK(totals->raw_bytes == 6000);
  CHECK(totals->pinned == 1);
}

TEST_CASE("store::Index keeps store_entries and store_bytes equal to the totals through upsert and remove") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  auto check_counters = [&index] {
    auto totals = index.totals();
    REQUIRE(totals.ok());
    CHECK(*index.counter_value(opcache::store::counter::store_entries) == totals->entries);
    CHECK(*index.counter_value(opcache::store::counter::store_bytes) == totals->bundle_bytes);
  };
  check_counters();
  for (int i = 1; i <= 3; ++i) {
    auto entry = make_entry(hex_key('a', i), hex_key('d', i));
    entry.bundle_size = 100 * i;
    REQUIRE(index.upsert(entry).ok());
  }
  check_counters();
  CHECK(*index.counter_value(opcache::store::counter::store_bytes) == 600);
  auto resized = make_entry(hex_key('a', 2), hex_key('e', 2));  // replace: 200 -> 1000 bytes
  resized.bundle_size = 1000;
  REQUIRE(index.upsert(resized).ok());
  check_counters();
  CHECK(*index.counter_value(opcache::store::counter::store_bytes) == 1400);
  REQUIRE(index.remove(hex_key('a', 1)).ok());
  REQUIRE(index.remove(hex_key('a', 3), hex_key('d', 3)).ok());
  check_counters();
  CHECK(*index.counter_value(opcache::store::counter::store_entries) == 1);
  CHECK(*index.counter_value(opcache::store::counter::store_bytes) == 1000);
}

TEST_CASE("store::Index list filters by every column, orders by key and paginates") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  // Inserted out of key order on purpose.
  const std::string k1 = hex_key('1'), k2 = hex_key('2'), k3 = hex_key('3'), k4 = hex_key('4'), k5 = hex_key('5');
  REQUIRE(index.upsert(make_entry(k4, hex_key('d', 4), "Relu", "multi", "train", "8.0.RC2", "Ascend910B1")).ok());
  REQUIRE(index.upsert(make_entry(k1, hex_key('d', 1), "MatMul", "single", "train", "8.0.RC2", "Ascend910B1")).ok());
  REQUIRE(index.upsert(make_entry(k3, hex_key('d', 3), "MatMul", "single", "infer", "8.0.RC2", "Ascend310P3")).ok());
  REQUIRE(index.upsert(make_entry(k5, hex_key('d', 5), "Relu", "single", "infer", "7.0.0", "Ascend910B1")).ok());
  REQUIRE(index.upsert(make_entry(k2, hex_key('d', 2), "Add", "multi", "infer", "8.0.RC2", "Ascend910B1")).ok());

  using Keys = std::vector<std::string>;
  CHECK(list_keys(index, {}) == Keys{k1, k2, k3, k4, k5});

  ListFilter filter;
  filter.op_type = "MatMul";
  CHECK(list_keys(index, filter) == Keys{k1, k3});
  filter = {};
  filter.device_mode = "multi";
  CHECK(list_keys(index, filter) == Keys{k2, k4});
  filter = {};
  filter.phase = "infer";
  CHECK(list_keys(index, filter) == Keys{k2, k3, k5});
  filter = {};
  filter.toolchain = "7.0.0";
  CHECK(list_keys(index, filter) == Keys{k5});
  filter = {};
  filter.soc = "Ascend310P3";
  CHECK(list_keys(index, filter) == Keys{k3});
  filter = {};
  filter.op_type = "Relu";
  filter.phase = "infer";
  CHECK(list_keys(index, filter) == Keys{k5});
  filter = {};
  filter.op_type = "Softmax";
  CHECK(list_keys(index, filter).empty());

  // Pagination: pages of two, each continuing after the last key seen.
  filter = {};
  filter.limit = 2;
  CHECK(list_keys(index, filter) == Keys{k1, k2});
  filter.after_key = k2;
  CHECK(list_keys(index, filter) == Keys{k3, k4});
  filter.after_key = k4;
  CHECK(list_keys(index, filter) == Keys{k5});
  filter.after_key = k5;
  CHECK(list_keys(index, filter).empty());
  filter = {};
  filter.limit = 0;
  CHECK(list_keys(index, filter).empty());
  // after_key combines with a filter.
  filter = {};
  filter.phase = "infer";
  filter.after_key = k2;
  CHECK(list_keys(index, filter) == Keys{k3, k5});
}

TEST_CASE("store::Index for_each visits rows in key order and stops when asked") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  std::vector<std::string> expected;
  for (int i = 5; i >= 1; --i) {
    REQUIRE(index.upsert(make_entry(hex_key('a', i), hex_key('d', i))).ok());
  }
  for (int i = 1; i <= 5; ++i) {
    expected.push_back(hex_key('a', i));
  }
  std::vector<std::string> visited;
  REQUIRE(index.for_each([&](const IndexEntry& entry) {
    visited.push_back(entry.key);
    return true;
  }).ok());
  CHECK(visited == expected);

  visited.clear();
  REQUIRE(index.for_each([&](const IndexEntry& entry) {
    visited.push_back(entry.key);
    return visited.size() < 2;
  }).ok());
  CHECK(visited == std::vector<std::string>{expected[0], expected[1]});
}

TEST_CASE("store::Index set_pinned flips the flag and reports whether the key exists") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  REQUIRE(index.upsert(make_entry(hex_key('a'), hex_key('d'))).ok());
  auto changed = index.set_pinned(hex_key('a'), true);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK((*index.lookup(hex_key('a')))->pinned);
  CHECK(index.totals()->pinned == 1);
  changed = index.set_pinned(hex_key('a'), false);
  REQUIRE(changed.ok());
  CHECK(*changed);
  CHECK_FALSE((*index.lookup(hex_key('a')))->pinned);
  CHECK(index.totals()->pinned == 0);
  changed = index.set_pinned(hex_key('b'), true);
  REQUIRE(changed.ok());
  CHECK_FALSE(*changed);
}

TEST_CASE("store::Index transactions roll back unless committed") {
  opcache::test::TempDir temp;
  Index index = open_index(temp / "index.db");
  {
    auto transaction = index.begin();
    REQUIRE(transaction.ok());
    REQUIRE(index.upsert(make_entry(hex_key('a'), hex_key('d'))).ok());
    REQUIRE(index.add_counter("stores", 1).ok());
  }
  CHECK_FALSE(index.lookup(hex_key('a'))->has_value());
  CHECK(index.counters()->count("stores") == 0);
  CHECK(*index.counter_value("store_entries") == 0);
  {
    auto transaction = index.begin();
    REQUIRE(transaction.ok());
    REQUIRE(index.upsert(make_entry(hex_key('a'), hex_key('d'))).ok());
    REQUIRE(transaction->commit().ok());
  }
  CHECK(index.lookup(hex_key('a'))->has_value());
}
