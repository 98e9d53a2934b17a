#include "store/index.hpp"

#include <utility>
#include <vector>

#include "base/try.hpp"

namespace opcache::store {

namespace {

// "OPCA": marks index.db as ours (PRAGMA application_id).
constexpr std::int64_t k_application_id = 0x4f504341;

// Forward migrations: k_migrations[v] takes the schema from version v to v+1.
// Never edit a released step; append a new one and bump k_index_schema_version.
const char* const k_migrations[] = {
    // 0 -> 1: initial schema.
    R"sql(
CREATE TABLE entries (
  key            TEXT PRIMARY KEY NOT NULL,
  digest         TEXT NOT NULL,
  bundle_size    INTEGER NOT NULL,
  raw_size       INTEGER NOT NULL,
  op_type        TEXT NOT NULL,
  device_mode    TEXT NOT NULL,
  phase          TEXT NOT NULL,
  toolchain      TEXT NOT NULL,
  soc            TEXT NOT NULL,
  scenario       TEXT NOT NULL,
  created_ms     INTEGER NOT NULL,
  last_access_ms INTEGER NOT NULL,
  build_ms       INTEGER NOT NULL,
  hits           INTEGER NOT NULL DEFAULT 0,
  pinned         INTEGER NOT NULL DEFAULT 0,
  signature      TEXT
) WITHOUT ROWID;
CREATE INDEX entries_by_digest ON entries(digest);
CREATE INDEX entries_by_access ON entries(pinned, last_access_ms);
CREATE INDEX entries_by_op_type ON entries(op_type);
CREATE TABLE counters (
  name  TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL
) WITHOUT ROWID;
-- store_entries / store_bytes follow every change to entries, in the same
-- transaction, so aging can test the size without scanning the table.
INSERT INTO counters (name, value) VALUES ('store_entries', 0), ('store_bytes', 0);
CREATE TRIGGER entries_after_insert AFTER INSERT ON entries BEGIN
  UPDATE counters SET value = value + 1 WHERE name = 'store_entries';
  UPDATE counters SET value = value + NEW.bundle_size WHERE name = 'store_bytes';
END;
CREATE TRIGGER entries_after_delete AFTER DELETE ON entries BEGIN
  UPDATE counters SET value = value - 1 WHERE name = 'store_entries';
  UPDATE counters SET value = value - OLD.bundle_size WHERE name = 'store_bytes';
END;
CREATE TRIGGER entries_after_resize AFTER UPDATE OF bundle_size ON entries BEGIN
  UPDATE counters SET value = value - OLD.bundle_size + NEW.bundle_size WHERE name = 'store_bytes';
END;
)sql",
    // 1 -> 2: key records (keys/) and the hit journal (hits.journal) beside
    // the index; the tables are unchanged. The version keeps out an opcache
    // that knows neither: it would neither fold the journal (aging would miss
    // hits) nor remove the records of the entries it removes.
    R"sql(
SELECT 1;
)sql",
};
static_assert(sizeof(k_migrations) / sizeof(k_migrations[0]) == k_index_schema_version,
              "one migration step per schema version");

constexpr const char* k_columns =
    "key, digest, bundle_size, raw_size, op_type, device_mode, phase, toolchain, soc, scenario, created_ms, "
    "last_access_ms, build_ms, hits, pinned, signature";

// The signature column: "" / NULL for none. A value that does not parse
// (written by something else) reads as no signatures: the entry is then
// unsigned, which a signature requirement refuses.
Signatures read_signatures(const Statement& row, int column) {
  if (row.column_is_null(column)) {
    return {};
  }
  auto parsed = parse_signatures(row.column_text(column));
  return parsed ? std::move(*parsed) : Signatures{};
}

IndexEntry read_entry(const Statement& row) {
  IndexEntry entry;
  entry.key = row.column_text(0);
  entry.digest = row.column_text(1);
  entry.bundle_size = row.column_int64(2);
  entry.raw_size = row.column_int64(3);
  entry.op_type = row.column_text(4);
  entry.device_mode = row.column_text(5);
  entry.phase = row.column_text(6);
  entry.toolchain = row.column_text(7);
  entry.soc = row.column_text(8);
  entry.scenario = row.column_text(9);
  entry.created_ms = row.column_int64(10);
  entry.last_access_ms = row.column_int64(11);
  entry.build_ms = row.column_int64(12);
  entry.hits = row.column_int64(13);
  entry.pinned = row.column_int64(14) != 0;
  entry.signatures = read_signatures(row, 15);
  return entry;
}

// Every row of a bound SELECT of k_columns, in order.
Result<std::vector<IndexEntry>> read_entries(Statement& statement) {
  std::vector<IndexEntry> entries;
  for (;;) {
    OPCACHE_TRY_ASSIGN(bool row, statement.step());
    if (!row) {
      return entries;
    }
    entries.push_back(read_entry(statement));
  }
}

void bind_signatures(Statement& statement, int index, const Signatures& signatures) {
  if (signatures.empty()) {
    statement.bind_null(index);
  } else {
    statement.bind(index, format_signatures(signatures));
  }
}

// What a database file says about itself, read in one read transaction, so
// a concurrent creator cannot be seen half-way.
struct Identity {
  std::int64_t application_id = 0;
  std::int64_t version = 0;
  std::int64_t objects = 0;  // tables, indexes, triggers (counted only without our application_id)
};

// The one integer a PRAGMA or SELECT returns.
Result<std::int64_t> read_integer(Database& db, const char* sql) {
  OPCACHE_TRY_ASSIGN(Statement statement, db.prepare(sql));
  OPCACHE_TRY_ASSIGN(bool row, statement.step());
  if (!row) {
    return Error::internal(std::string("index query returned no row: ") + sql);
  }
  return statement.column_int64(0);
}

// Plain PRAGMAs rather than one SELECT of the pragma_* table functions,
// which cost the first open of an index about 170k instructions more
// (callgrind). The file's objects are counted only when the application_id
// is not ours (a new or foreign file), where check_identity needs them.
Result<Identity> read_identity_in(Database& db) {
  Identity identity;
  OPCACHE_TRY_ASSIGN(identity.application_id, read_integer(db, "PRAGMA application_id"));
  OPCACHE_TRY_ASSIGN(identity.version, read_integer(db, "PRAGMA user_version"));
  if (identity.application_id != k_application_id) {
    OPCACHE_TRY_ASSIGN(identity.objects, read_integer(db, "SELECT count(*) FROM sqlite_master"));
  }
  return identity;
}

// read_identity_in() in a read transaction of its own, unless `in_transaction`.
Result<Identity> read_identity(Database& db, bool in_transaction = false) {
  if (in_transaction) {
    return read_identity_in(db);
  }
  OPCACHE_TRY(db.exec("BEGIN"));
  auto identity = read_identity_in(db);
  // A read transaction: ending it cannot lose anything.
  (void)db.exec(identity ? "COMMIT" : "ROLLBACK");
  return identity;
}

// Ours (any version we understand), or empty; anything else is refused.
Status check_identity(Database& db, const Identity& identity) {
  const std::string where = "index " + db.path().string();
  if (identity.application_id != 0 && identity.application_id != k_application_id) {
    return Error::usage(where + " is not an opcache index (foreign application_id); use another --cache-dir");
  }
  if (identity.version > k_index_schema_version) {
    return Error::usage(where + " has schema version " + std::to_string(identity.version) +
                        ", newer than this opcache understands (" + std::to_string(k_index_schema_version) +
                        "); upgrade opcache or use another --cache-dir");
  }
  if (identity.application_id == 0 && identity.objects != 0) {
    return Error::usage(where + " is an SQLite database that opcache did not create; use another --cache-dir");
  }
  return {};
}

Status migrate(Database& db) {
  OPCACHE_TRY_ASSIGN(Transaction transaction, Transaction::begin(db));
  // Re-read under the write lock: another process may have migrated meanwhile.
  OPCACHE_TRY_ASSIGN(Identity identity, read_identity(db, true));
  OPCACHE_TRY(check_identity(db, identity));
  for (auto step = identity.version; step < k_index_schema_version; ++step) {
    OPCACHE_TRY(db.exec(k_migrations[step]));
  }
  OPCACHE_TRY(db.exec("PRAGMA application_id=" + std::to_string(k_application_id)));
  OPCACHE_TRY(db.exec("PRAGMA user_version=" + std::to_string(k_index_schema_version)));
  return transaction.commit();
}

}  // namespace

Result<Index> Index::open(const std::filesystem::path& path, int busy_timeout_ms, LockWaitObserver on_lock_wait) {
  OPCACHE_TRY_ASSIGN(Database db, Database::open(path, busy_timeout_ms, std::move(on_lock_wait)));
  // Identify the file before changing anything in it: a refused file stays as it was.
  OPCACHE_TRY_ASSIGN(Identity identity, read_identity(db));
  OPCACHE_TRY(check_identity(db, identity));
  OPCACHE_TRY(db.configure());
  if (identity.version < k_index_schema_version || identity.application_id != k_application_id) {
    OPCACHE_TRY(migrate(db));
  }
  Index index(std::move(db));
  OPCACHE_TRY(index.prepare_statements());
  return index;
}

void Index::prepare_put_statements() {
  m_lookup.prepare();
  m_insert.prepare();
  m_add_counter.prepare();
}

Status Index::prepare_statements() {
  OPCACHE_TRY_ASSIGN(m_lookup,
                     m_db.prepare_deferred(std::string("SELECT ") + k_columns + " FROM entries WHERE key = ?1"));
  // A key's first row: a plain INSERT, which SQLite compiles in about half
  // the instructions of the upsert below (one trigger, no DO UPDATE).
  OPCACHE_TRY_ASSIGN(m_insert, m_db.prepare_deferred(std::string("INSERT INTO entries (") + k_columns +
                                                     ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16)"));
  // An upsert (not INSERT OR REPLACE) so the size triggers see an UPDATE.
  OPCACHE_TRY_ASSIGN(
      m_upsert, m_db.prepare_deferred(std::string("INSERT INTO entries (") + k_columns +
                                      ") VALUES (?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,?14,?15,?16) "
                                      "ON CONFLICT(key) DO UPDATE SET digest = excluded.digest, "
                                      "bundle_size = excluded.bundle_size, raw_size = excluded.raw_size, "
                                      "op_type = excluded.op_type, device_mode = excluded.device_mode, "
                                      "phase = excluded.phase, toolchain = excluded.toolchain, soc = excluded.soc, "
                                      "scenario = excluded.scenario, created_ms = excluded.created_ms, "
                                      "last_access_ms = excluded.last_access_ms, build_ms = excluded.build_ms, "
                                      "hits = excluded.hits, pinned = excluded.pinned, signature = excluded.signature"));
  OPCACHE_TRY_ASSIGN(m_set_signatures,
                     m_db.prepare_deferred("UPDATE entries SET signature = ?3 WHERE key = ?1 AND digest = ?2"));
  OPCACHE_TRY_ASSIGN(m_remove, m_db.prepare_deferred("DELETE FROM entries WHERE key = ?1"));
  OPCACHE_TRY_ASSIGN(m_remove_if_digest, m_db.prepare_deferred("DELETE FROM entries WHERE key = ?1 AND digest = ?2"));
  OPCACHE_TRY_ASSIGN(m_digest_referenced, m_db.prepare_deferred("SELECT 1 FROM entries WHERE digest = ?1 LIMIT 1"));
  OPCACHE_TRY_ASSIGN(m_record_hit, m_db.prepare_deferred(
                                       "UPDATE entries SET hits = hits + ?3, last_access_ms = max(last_access_ms, ?2) "
                                       "WHERE key = ?1"));
  OPCACHE_TRY_ASSIGN(m_record_hit_no_access,
                     m_db.prepare_deferred("UPDATE entries SET hits = hits + ?3 WHERE key = ?1"));
  OPCACHE_TRY_ASSIGN(m_add_counter,
                     m_db.prepare_deferred("INSERT INTO counters (name, value) VALUES (?1, ?2) "
                                           "ON CONFLICT(name) DO UPDATE SET value = value + excluded.value"));
  OPCACHE_TRY_ASSIGN(m_least_recently_used,
                     m_db.prepare_deferred(std::string("SELECT ") + k_columns +
                                           " FROM entries WHERE pinned = 0 AND (last_access_ms, key) > (?1, ?2) "
                                           "ORDER BY last_access_ms, key LIMIT ?3"));
  return {};
}

Result<std::optional<IndexEntry>> Index::lookup(const std::string& key) {
  m_lookup.reset();
  m_lookup.bind(1, key);
  OPCACHE_TRY_ASSIGN(bool row, m_lookup.step());
  std::optional<IndexEntry> entry;
  if (row) {
    entry = read_entry(m_lookup);
  }
  m_lookup.reset();
  return entry;
}

Status Index::write_row(Statement& statement, const IndexEntry& entry) {
  statement.reset();
  statement.bind_all(entry.key, entry.digest, entry.bundle_size, entry.raw_size, entry.op_type, entry.device_mode,
                     entry.phase, entry.toolchain, entry.soc, entry.scenario, entry.created_ms, entry.last_access_ms,
                     entry.build_ms, entry.hits, std::int64_t{entry.pinned ? 1 : 0});
  bind_signatures(statement, 16, entry.signatures);
  auto status = statement.run();
  statement.reset();
  return status;
}

Status Index::upsert(const IndexEntry& entry) { return write_row(m_upsert, entry); }

Status Index::insert(const IndexEntry& entry) { return write_row(m_insert, entry); }

Result<bool> Index::remove(const std::string& key, const std::optional<std::string>& only_if_digest) {
  Statement& statement = only_if_digest ? m_remove_if_digest : m_remove;
  statement.reset();
  statement.bind(1, key);
  if (only_if_digest) {
    statement.bind(2, *only_if_digest);
  }
  auto status = statement.run();
  statement.reset();
  OPCACHE_TRY(status);
  return m_db.changes() > 0;
}

Result<bool> Index::set_signatures(const std::string& key, const std::string& digest,
                                   const Signatures& signatures) {
  m_set_signatures.reset();
  m_set_signatures.bind(1, key).bind(2, digest);
  bind_signatures(m_set_signatures, 3, signatures);
  auto status = m_set_signatures.run();
  m_set_signatures.reset();
  OPCACHE_TRY(status);
  return m_db.changes() > 0;
}

Result<bool> Index::digest_referenced(const std::string& digest) {
  m_digest_referenced.reset();
  m_digest_referenced.bind(1, digest);
  auto row = m_digest_referenced.step();
  m_digest_referenced.reset();
  return row;
}

Status Index::record_hits(const std::string& key, std::int64_t count, std::int64_t access_ms, bool update_access) {
  Statement& statement = update_access ? m_record_hit : m_record_hit_no_access;
  statement.reset();
  statement.bind(1, key).bind(3, count);
  if (update_access) {
    statement.bind(2, access_ms);
  }
  auto status = statement.run();
  statement.reset();
  return status;
}

Status Index::add_counter(const std::string& name, std::int64_t delta) {
  m_add_counter.reset();
  m_add_counter.bind(1, name).bind(2, delta);
  auto status = m_add_counter.run();
  m_add_counter.reset();
  return status;
}

Result<std::map<std::string, std::int64_t>> Index::counters() {
  OPCACHE_TRY_ASSIGN(Statement statement, m_db.prepare("SELECT name, value FROM counters"));
  std::map<std::string, std::int64_t> values;
  for (;;) {
    OPCACHE_TRY_ASSIGN(bool row, statement.step());
    if (!row) {
      return values;
    }
    values[statement.column_text(0)] = statement.column_int64(1);
  }
}

Result<IndexTotals> Index::totals() {
  OPCACHE_TRY_ASSIGN(Statement statement,
                     m_db.prepare("SELECT count(*), coalesce(sum(bundle_size),0), coalesce(sum(raw_size),0), "
                                  "coalesce(sum(pinned),0) FROM entries"));
  OPCACHE_TRY(statement.step());
  return IndexTotals{statement.column_int64(0), statement.column_int64(1), statement.column_int64(2),
                     statement.column_int64(3)};
}

Result<std::vector<IndexEntry>> Index::list(const ListFilter& filter) {
  // Only the columns the filter names: fewer terms to compile (a one-shot
  // process prepares this once), and an op_type filter can use
  // entries_by_op_type, which "?1 = '' OR op_type = ?1" kept the planner from.
  const std::pair<const char*, const std::string*> columns[] = {{"op_type", &filter.op_type},
                                                                {"device_mode", &filter.device_mode},
                                                                {"phase", &filter.phase},
                                                                {"toolchain", &filter.toolchain},
                                                                {"soc", &filter.soc}};
  std::string sql = std::string("SELECT ") + k_columns + " FROM entries WHERE key > ?1";
  std::vector<const std::string*> values;
  for (const auto& [column, value] : columns) {
    if (!value->empty()) {
      values.push_back(value);
      sql += std::string(" AND ") + column + " = ?" + std::to_string(values.size() + 2);
    }
  }
  sql += " ORDER BY key LIMIT ?2";
  OPCACHE_TRY_ASSIGN(Statement statement, m_db.prepare(sql));
  statement.bind(1, filter.after_key).bind(2, filter.limit);
  for (std::size_t i = 0; i < values.size(); ++i) {
    statement.bind(static_cast<int>(i) + 3, *values[i]);
  }
  return read_entries(statement);
}

Status Index::for_each(const std::function<bool(const IndexEntry&)>& visit) {
  OPCACHE_TRY_ASSIGN(Statement statement,
                     m_db.prepare(std::string("SELECT ") + k_columns + " FROM entries ORDER BY key"));
  for (;;) {
    OPCACHE_TRY_ASSIGN(bool row, statement.step());
    if (!row || !visit(read_entry(statement))) {
      return {};
    }
  }
}

Result<bool> Index::set_pinned(const std::string& key, bool pinned) {
  OPCACHE_TRY_ASSIGN(Statement statement, m_db.prepare("UPDATE entries SET pinned = ?2 WHERE key = ?1"));
  statement.bind(1, key).bind(2, std::int64_t{pinned ? 1 : 0});
  OPCACHE_TRY(statement.run());
  return m_db.changes() > 0;
}

Result<std::int64_t> Index::counter_value(const std::string& name) {
  OPCACHE_TRY_ASSIGN(Statement statement, m_db.prepare("SELECT value FROM counters WHERE name = ?1"));
  statement.bind(1, name);
  OPCACHE_TRY_ASSIGN(bool row, statement.step());
  return row ? statement.column_int64(0) : 0;
}

Result<std::vector<IndexEntry>> Index::least_recently_used(std::int64_t after_access_ms, const std::string& after_key,
                                                           std::int64_t limit) {
  m_least_recently_used.reset();
  m_least_recently_used.bind(1, after_access_ms).bind(2, after_key).bind(3, limit);
  auto entries = read_entries(m_least_recently_used);
  m_least_recently_used.reset();
  return entries;
}

}  // namespace opcache::store
