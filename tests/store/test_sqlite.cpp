// store/sqlite: statements prepared on first use (Database::prepare_deferred).
#include <doctest/doctest.h>

#include "store/sqlite.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::store::Database;
using opcache::test::TempDir;

TEST_CASE("store::sqlite a deferred statement runs like a prepared one, and a bad one fails at its first step") {
  TempDir temp;
  auto db = Database::open(temp / "index.db", 1000);
  REQUIRE(db.ok());
  REQUIRE(db->exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)").ok());

  // Deferred before the table it reads exists would fail to prepare; it is
  // only parsed at first use, so creating the statement succeeds.
  auto insert = db->prepare_deferred("INSERT INTO t (k, v) VALUES (?1, ?2)");
  REQUIRE(insert.ok());
  insert->reset();  // not prepared yet: harmless
  REQUIRE(insert->bind_all(std::string("a"), std::int64_t{7}).run().ok());
  insert->reset();
  REQUIRE(insert->bind_all(std::string("b"), std::int64_t{9}).run().ok());

  auto select = db->prepare_deferred("SELECT sum(v) FROM t");
  REQUIRE(select.ok());
  auto row = select->step();
  REQUIRE(row.ok());
  REQUIRE(*row);
  CHECK(select->column_int64(0) == 16);

  auto bad = db->prepare_deferred("SELECT nope FROM missing_table");
  REQUIRE(bad.ok());
  bad->reset();
  auto failed = bad->step();
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.error().message().find("missing_table") != std::string::npos);
  CHECK_FALSE(bad->step().ok());  // stays failed
}
