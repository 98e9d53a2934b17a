// The hit path without the index (store/key_table.hpp, store/hit_journal.hpp):
// a hit finds its object through the key record and records itself in the
// hit journal; the index stays the truth and writers fold the journal in.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/scenario.hpp"
#include "store/hit_journal.hpp"
#include "store/index.hpp"
#include "store/key.hpp"
#include "store/key_table.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace hit_path_test {

namespace fs = std::filesystem;
using opcache::store::LocalStore;

// A store whose clock and warnings the test controls (tests/support/store_fixture.hpp), its clock in 2026.
struct Cache : opcache::test::StoreFixture {
  explicit Cache(const fs::path& root, opcache::store::AgingPolicy aging = {})
      : StoreFixture(root, aging, 1'790'000'000'000) {}
};

opcache::store::BundleInput kernel_input(const opcache::test::KernelTriple& kernel, std::int64_t build_ms = 250) {
  opcache::store::BundleInput input;
  input.descriptor = nlohmann::json::parse(kernel.descriptor_json);
  auto scenario = opcache::parse_scenario(opcache::test::k_test_scenario);
  REQUIRE(scenario.ok());
  input.scenario = opcache::store::scenario_to_json(*scenario);
  for (const auto& file : kernel.files()) {
    input.members.push_back(opcache::store::MemberSource{file.filename().string(), file, ""});
  }
  input.build_ms = build_ms;
  return input;
}

opcache::PutResult stored(LocalStore& store, const opcache::store::BundleInput& input,
                          opcache::ReplacePolicy policy = opcache::ReplacePolicy::keep_existing) {
  auto put = store.put(input, policy);
  REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));
  return *put;
}

std::int64_t counter_of(LocalStore& store, const std::string& name) {
  auto stats = store.stats();
  REQUIRE(stats.ok());
  auto it = stats->counters.find(name);
  return it == stats->counters.end() ? 0 : it->second;
}

std::string bytes_of(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void overwrite(const fs::path& file, const std::string& text) {
  std::ofstream(file, std::ios::binary | std::ios::trunc) << text;
}

// Gets `key` into a fresh directory and checks every member's bytes against `kernel`.
void expect_hit_with_bytes(LocalStore& store, const std::string& key, const opcache::test::KernelTriple& kernel,
                           const fs::path& out) {
  auto hit = store.get(key, out);
  REQUIRE_MESSAGE(hit.ok(), (hit.ok() ? "" : hit.error().message()));
  REQUIRE(hit->has_value());
  for (const auto& file : kernel.files()) {
    CHECK(bytes_of(out / file.filename()) == bytes_of(file));
  }
}

TEST_CASE("store::LocalStore: a hit through the key record never opens the index, and writes only the journal") {
  opcache::test::TempDir temp;
  const auto kernel = opcache::test::make_kernel(temp.path() / "k", "square", 16);
  const auto input = kernel_input(kernel);
  std::string key;
  {
    Cache cache(temp.path() / "cache");
    key = stored(*cache.store, input).key;
  }
  CHECK(fs::is_regular_file(temp.path() / "cache" / "keys" / key.substr(0, 2) / key));
  const auto index_bytes = bytes_of(temp.path() / "cache" / "index.db");
  {
    Cache cache(temp.path() / "cache");
    expect_hit_with_bytes(*cache.store, key, kernel, temp.path() / "out1");
    expect_hit_with_bytes(*cache.store, key, kernel, temp.path() / "out2");
    CHECK_FALSE(cache->index_opened());
    auto hit = cache->get(key, temp.path() / "out3");
    REQUIRE((hit.ok() && hit->has_value()));
    CHECK((*hit)->entry.op_type == "square");
    CHECK(bytes_of(temp.path() / "cache" / "keys" / key.substr(0, 2) / key).find((*hit)->entry.digest) !=
          std::string::npos);
    CHECK((*hit)->entry.build_ms == 250);
    CHECK((*hit)->entry.last_access_ms == cache.now_ms);
    CHECK_FALSE(cache->index_opened());
  }
  // Three hits, journaled when the store closed; the index file untouched.
  CHECK(bytes_of(temp.path() / "cache" / "index.db") == index_bytes);
  opcache::store::StoreLayout layout(temp.path() / "cache");
  auto journaled = opcache::store::HitJournal(layout).take();
  REQUIRE((journaled.ok() && journaled->size() == 1));
  CHECK((*journaled)[0].key == key);
  CHECK((*journaled)[0].hits == 3);
}

TEST_CASE("store::LocalStore folds the hit journal into the index before stats, lookup and aging") {
  opcache::test::TempDir temp;
  const auto kernel = opcache::test::make_kernel(temp.path() / "k", "square", 16);
  std::string key;
  std::int64_t raw_size = 0;
  {
    Cache cache(temp.path() / "cache");
    const auto put = stored(*cache.store, kernel_input(kernel, 400));
    key = put.key;
    raw_size = put.raw_bytes;
  }
  {
    Cache cache(temp.path() / "cache");
    cache.now_ms += 5000;
    for (int i = 0; i < 4; ++i) {
      expect_hit_with_bytes(*cache.store, key, kernel, temp.path() / ("out" + std::to_string(i)));
    }
  }
  Cache reader(temp.path() / "cache");
  reader.now_ms += 60000;
  CHECK(counter_of(*reader.store, "hits") == 4);
  CHECK(counter_of(*reader.store, "bytes_served") == 4 * raw_size);
  CHECK(counter_of(*reader.store, "compile_ms_saved") == 4 * 400);
  auto row = reader->lookup(key);
  REQUIRE((row.ok() && row->has_value()));
  CHECK((*row)->hits == 4);
  // The journal was emptied by the fold: folding again adds nothing.
  CHECK(fs::file_size(temp.path() / "cache" / "hits.journal") == 0);
  CHECK(counter_of(*reader.store, "hits") == 4);
}

TEST_CASE("store::LocalStore: aging sees the access times of journaled hits") {
  opcache::test::TempDir temp;
  const auto kernel_a = opcache::test::make_kernel(temp.path() / "a", "square", 16);
  const auto kernel_b = opcache::test::make_kernel(temp.path() / "b", "square", 32);
  opcache::store::AgingPolicy aging;
  aging.max_bytes = 1;  // everything idle goes
  aging.min_idle_ms = 60'000;
  std::string key_a, key_b;
  opcache::store::AgingPolicy no_aging;
  no_aging.max_bytes = -1;
  {
    Cache cache(temp.path() / "cache", no_aging);
    key_a = stored(*cache.store, kernel_input(kernel_a)).key;
    key_b = stored(*cache.store, kernel_input(kernel_b)).key;
  }
  {
    Cache cache(temp.path() / "cache", aging);
    cache.now_ms += 10 * 60'000;
    expect_hit_with_bytes(*cache.store, key_a, kernel_a, temp.path() / "out");
    CHECK_FALSE(cache->index_opened());
  }
  Cache gc(temp.path() / "cache", aging);
  gc.now_ms += 10 * 60'000 + 1000;  // a used 1 s ago, b idle for 10 min
  auto report = gc->collect_garbage(aging, opcache::store::GcMode::remove);
  REQUIRE(report.ok());
  CHECK(report->entries_removed == 1);
  auto has_a = gc->contains(key_a);
  auto has_b = gc->contains(key_b);
  REQUIRE((has_a.ok() && has_b.ok()));
  CHECK(*has_a);
  CHECK_FALSE(*has_b);
  CHECK_FALSE(fs::exists(temp.path() / "cache" / "keys" / key_b.substr(0, 2) / key_b));
}

TEST_CASE("store::LocalStore: a missing, unreadable or stale key record sends the hit to the index, which rewrites it") {
  opcache::test::TempDir temp;
  const auto kernel = opcache::test::make_kernel(temp.path() / "k", "square", 16);
  const auto input = kernel_input(kernel, 100);
  Cache cache(temp.path() / "cache");
  const auto first = stored(*cache.store, input);
  const fs::path record = temp.path() / "cache" / "keys" / first.key.substr(0, 2) / first.key;
  const auto first_record = bytes_of(record);
  auto replaced_input = input;
  replaced_input.build_ms = 200;  // another bundle of the same key
  const auto second = stored(*cache.store, replaced_input, opcache::ReplacePolicy::replace);
  REQUIRE(second.digest != first.digest);
  CHECK(bytes_of(record).find(second.digest) != std::string::npos);

  SUBCASE("stale: names the replaced object, which is gone") { overwrite(record, first_record); }
  SUBCASE("unreadable") { overwrite(record, "{\"format\":1,\"key\":"); }
  SUBCASE("of another format") {
    auto json = nlohmann::json::parse(first_record);
    json["format"] = opcache::store::k_key_record_format + 1;
    overwrite(record, json.dump());
  }
  SUBCASE("missing") { fs::remove(record); }

  // Another process (this store remembers the records it wrote).
  Cache reader(temp.path() / "cache");
  auto hit = reader->get(first.key, temp.path() / "out");
  REQUIRE((hit.ok() && hit->has_value()));
  CHECK((*hit)->entry.digest == second.digest);
  CHECK((*hit)->entry.build_ms == 200);
  CHECK(bytes_of(record).find(second.digest) != std::string::npos);
  CHECK(reader.warnings.empty());
}

TEST_CASE("store::LocalStore: remove and revoke erase the key record, and a record of a removed key is a miss") {
  opcache::test::TempDir temp;
  const auto kernel = opcache::test::make_kernel(temp.path() / "k", "square", 16);
  Cache cache(temp.path() / "cache");
  const auto put = stored(*cache.store, kernel_input(kernel));
  const fs::path record = temp.path() / "cache" / "keys" / put.key.substr(0, 2) / put.key;
  const auto record_text = bytes_of(record);

  SUBCASE("remove") {
    auto removed = cache->remove(put.key);
    REQUIRE((removed.ok() && *removed));
  }
  SUBCASE("revoke") {
    auto revoked = cache->revoke(opcache::store::Tombstone{put.key, "wrong results", 1790000000000});
    REQUIRE((revoked.ok() && *revoked));
  }
  CHECK_FALSE(fs::exists(record));
  // A record that outlived its entry (a removal raced with a hit that wrote it):
  overwrite(record, record_text);
  auto hit = cache->get(put.key, temp.path() / "out");
  REQUIRE(hit.ok());
  CHECK_FALSE(hit->has_value());
  CHECK_FALSE(fs::exists(record));
  CHECK_FALSE(fs::exists(temp.path() / "out" / kernel.object.filename()));
}

TEST_CASE("store::LocalStore::verify reports key records that disagree with the index and repairs them") {
  opcache::test::TempDir temp;
  const auto kernel_a = opcache::test::make_kernel(temp.path() / "a", "square", 16);
  const auto kernel_b = opcache::test::make_kernel(temp.path() / "b", "square", 32);
  Cache cache(temp.path() / "cache");
  const auto a = stored(*cache.store, kernel_input(kernel_a));
  const auto b = stored(*cache.store, kernel_input(kernel_b));
  const auto keys = temp.path() / "cache" / "keys";
  const auto record_a = keys / a.key.substr(0, 2) / a.key;
  const auto record_b = keys / b.key.substr(0, 2) / b.key;
  overwrite(record_a, "not json");
  const auto b_text = bytes_of(record_b);
  REQUIRE(cache->remove(b.key).ok());
  fs::create_directories(record_b.parent_path());
  overwrite(record_b, b_text);

  auto report = cache->verify(/*repair=*/false);
  REQUIRE(report.ok());
  std::vector<std::string> stale;
  for (const auto& problem : report->problems) {
    if (problem.kind == "stale_key_record") {
      stale.push_back(problem.subject);
    }
  }
  std::sort(stale.begin(), stale.end());
  std::vector<std::string> expected{a.key, b.key};
  std::sort(expected.begin(), expected.end());
  CHECK(stale == expected);

  auto repaired = cache->verify(/*repair=*/true);
  REQUIRE(repaired.ok());
  for (const auto& problem : repaired->problems) {
    CHECK(problem.repaired);
  }
  CHECK(bytes_of(record_a).find(a.digest) != std::string::npos);
  CHECK_FALSE(fs::exists(record_b));
  auto clean = cache->verify(/*repair=*/false);
  REQUIRE(clean.ok());
  CHECK(clean->problems.empty());
}

TEST_CASE("store::HitJournal merges records per key and skips lines a crash tore") {
  opcache::test::TempDir temp;
  opcache::store::StoreLayout layout(temp.path());
  opcache::store::HitJournal journal(layout);
  const std::string key_a(64, 'a');
  const std::string key_b(64, 'b');
  auto appended = journal.append({{key_a, 2, 1000, 300, 40}, {key_b, 1, 500, 10, 5}});
  REQUIRE(appended.ok());
  CHECK(*appended > 0);
  REQUIRE(journal.append({{key_a, 1, 900, 100, 20}}).ok());
  {
    std::ofstream torn(layout.hit_journal(), std::ios::app);
    torn << "zz not a record\n" << key_b << " 1 2 3\n" << key_a << " 7 7000 7";  // no newline: torn
  }
  auto taken = journal.take();
  REQUIRE(taken.ok());
  REQUIRE(taken->size() == 2);
  const auto& a = (*taken)[0];
  CHECK(a.key == key_a);
  CHECK(a.hits == 3);
  CHECK(a.last_access_ms == 1000);
  CHECK(a.bytes == 400);
  CHECK(a.saved_ms == 60);
  CHECK((*taken)[1].key == key_b);
  CHECK((*taken)[1].hits == 1);
  auto again = journal.take();
  REQUIRE(again.ok());
  CHECK(again->empty());
}

TEST_CASE("store::Index migrates a schema 1 index to 2 with its rows") {
  opcache::test::TempDir temp;
  const auto kernel = opcache::test::make_kernel(temp.path() / "k", "square", 16);
  std::string key;
  {
    Cache cache(temp.path() / "cache");
    key = stored(*cache.store, kernel_input(kernel)).key;
  }
  const auto path = temp.path() / "cache" / "index.db";
  {
    auto index = opcache::store::Index::open(path, 1000);
    REQUIRE(index.ok());
    REQUIRE(index->database().exec("PRAGMA user_version=1").ok());
  }
  auto migrated = opcache::store::Index::open(path, 1000);
  REQUIRE(migrated.ok());
  auto version = migrated->database().prepare("PRAGMA user_version");
  REQUIRE(version.ok());
  REQUIRE(version->step().ok());
  CHECK(version->column_int64(0) == opcache::store::k_index_schema_version);
  CHECK(opcache::store::k_index_schema_version == 2);
  auto row = migrated->lookup(key);
  REQUIRE((row.ok() && row->has_value()));
}

}  // namespace hit_path_test

namespace hit_path_test {

// Every field of two entries, compared one by one (Entry has no operator==).
void check_same_entry(const opcache::Entry& got, const opcache::Entry& want) {
  CHECK(got.key == want.key);
  CHECK(got.digest == want.digest);
  CHECK(got.bundle_size == want.bundle_size);
  CHECK(got.raw_size == want.raw_size);
  CHECK(got.op_type == want.op_type);
  CHECK(got.device_mode == want.device_mode);
  CHECK(got.phase == want.phase);
  CHECK(got.toolchain == want.toolchain);
  CHECK(got.soc == want.soc);
  CHECK(got.scenario == want.scenario);
  CHECK(got.created_ms == want.created_ms);
  CHECK(got.build_ms == want.build_ms);
  CHECK(got.pinned == want.pinned);
  CHECK(got.signatures == want.signatures);
}

TEST_CASE("store::KeyTable reads back every field it wrote, and a record of another shape as the strict parser does") {
  opcache::test::TempDir temp;
  opcache::store::StoreLayout layout(temp.path() / "cache");
  REQUIRE(layout.create_directories().ok());
  const opcache::store::KeyTable table(layout);
  opcache::Entry entry;
  entry.key = std::string(64, 'a');
  entry.digest = std::string(64, 'b');
  entry.bundle_size = 4950;
  entry.raw_size = 7144;
  entry.op_type = "Reduce\"Max\\";  // escapes in the record
  entry.device_mode = "single";
  entry.phase = "train";
  entry.toolchain = "gcc-12";
  entry.soc = "x86_64";
  entry.scenario = R"({"device_mode":"single","phase":"train","soc":"x86_64","toolchain":"gcc-12"})";
  entry.created_ms = 1'795'890'814'358;
  entry.build_ms = 124;
  entry.pinned = true;
  entry.signatures = {{std::string(32, '\x01'), std::string(64, '\x02')}};
  REQUIRE(table.write(entry).ok());
  auto read = table.read(entry.key);
  REQUIRE(read.has_value());
  check_same_entry(*read, entry);

  // Written by another writer: fields in another order, an extra field, a
  // \u escape and a negative build time. The scan gives up; the strict parser reads it.
  const std::string record = R"({"unknown":[1,{"x":true}],"soc":"x86_64","build_ms":-1,"pinned":false,)"
                             R"("format":1,"key":")" + entry.key + R"(","digest":")" + entry.digest +
                             R"(","bundle_size":1,"raw_size":2,"op_type":"Add\u0041","device_mode":"multi",)"
                             R"("phase":"infer","toolchain":"t","scenario":"{}","created_ms":3,"signatures":""})";
  {
    std::ofstream out(table.record_path(entry.key), std::ios::trunc);
    out << record;
  }
  auto other = table.read(entry.key);
  REQUIRE(other.has_value());
  CHECK(other->op_type == "AddA");
  CHECK(other->build_ms == -1);
  CHECK(other->device_mode == "multi");
  CHECK_FALSE(other->pinned);
  CHECK(other->signatures.empty());
  // A record of another key or format is no record, whichever reader sees it.
  std::string other_format = record;
  other_format.replace(other_format.find(R"("format":1)"), 10, R"("format":2)");
  for (const std::string& bad : {other_format, std::string("{}"), std::string("not json")}) {
    std::ofstream(table.record_path(entry.key), std::ios::trunc) << bad;
    CHECK_FALSE(table.read(entry.key).has_value());
  }
}

}  // namespace hit_path_test
