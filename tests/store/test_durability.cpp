// Hits are recorded without fsync (the hit journal, store/hit_journal.hpp,
// and its folds into the index, store/sqlite.hpp DeferredSync): a power cut
// may lose the last hit records, never an entry. These tests model the cut by
// cutting the journal (emptied, torn mid-line, garbage) and the index's
// write-ahead log back to what was synced when the last entry was stored, and
// check that the store still reads every entry byte for byte, verifies clean
// and keeps working.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using opcache::test::counter;
using opcache::test::KernelTriple;
using opcache::test::TempDir;

namespace {

struct StoredKernels {
  std::vector<KernelTriple> kernels;
  std::vector<std::string> keys;
};

// Opens the cache at `root` with no remote; REQUIREs success.
opcache::Store open_store_without_remotes(const fs::path& root) {
  opcache::StoreConfig config;
  config.cache_dir = root;
  config.no_remote = true;
  auto store = opcache::Store::open(config);
  REQUIRE_MESSAGE(store.ok(), (store.ok() ? "" : store.error().message()));
  return std::move(store).value();
}

StoredKernels put_kernels(const fs::path& root, const fs::path& work, int count, int first_length = 16) {
  const auto scenario = opcache::parse_scenario(opcache::test::k_test_scenario).value();
  auto store = open_store_without_remotes(root);
  StoredKernels stored;
  for (int i = 0; i < count; ++i) {
    stored.kernels.push_back(opcache::test::make_kernel(work / ("k" + std::to_string(i)), "Add", first_length + i));
    auto put = store.put(stored.kernels.back().descriptor_json, scenario, stored.kernels.back().files());
    REQUIRE(put.ok());
    stored.keys.push_back(put->key);
  }
  return stored;
}

// Reads every entry back (each read is a hit recorded when the store closes).
void read_all(const fs::path& root, const StoredKernels& stored, const fs::path& out) {
  auto store = open_store_without_remotes(root);
  for (std::size_t i = 0; i < stored.keys.size(); ++i) {
    auto hit = store.get(stored.keys[i], out / std::to_string(i));
    REQUIRE(hit.ok());
    REQUIRE(hit->has_value());
    for (const auto& file : stored.kernels[i].files()) {
      CHECK(opcache::test::read_text(out / std::to_string(i) / file.filename()) == opcache::test::read_text(file));
    }
  }
}

// What a power cut leaves of the log: its synced prefix, then `tail`.
void cut_wal(const fs::path& root, std::uintmax_t synced_size, const std::string& tail) {
  const fs::path wal = root / "index.db-wal";
  fs::resize_file(wal, synced_size);
  std::ofstream(wal, std::ios::binary | std::ios::app) << tail;
  fs::remove(root / "index.db-shm");  // shared memory does not survive a power cut
}

// `verify` finds `entries` entries and no problem.
void check_verifies_sound(opcache::Store& store, std::int64_t entries) {
  auto report = store.verify(false);
  REQUIRE(report.ok());
  CHECK(report->entries_checked == entries);
  CHECK(report->problems.empty());
}

}  // namespace

TEST_CASE("store::durability hit records lost to a power cut leave every entry readable and the store sound") {
  TempDir temp;
  const fs::path root = temp / "cache";
  const StoredKernels stored = put_kernels(root, temp / "work", 5);
  const fs::path wal = root / "index.db-wal";
  const fs::path journal = root / "hits.journal";
  // Stores are synced when they return, and closing does not checkpoint: the
  // log as it is now is what a power cut cannot take away.
  REQUIRE(fs::exists(wal));
  const std::uintmax_t synced_size = fs::file_size(wal);

  read_all(root, stored, temp / "first");
  // The hits went to the journal, unsynced, and not to the index.
  CHECK(fs::file_size(wal) == synced_size);
  const std::string journaled = opcache::test::read_text(journal);
  REQUIRE(std::count(journaled.begin(), journaled.end(), '\n') == 5);

  std::string garbage(1000, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) {
    garbage[i] = static_cast<char>((i * 131 + 7) % 251);
  }
  struct Cut {
    const char* name;
    std::string journal;  // what the power cut left of it
    std::int64_t hits;    // complete lines in it, one hit on one key each
  };
  const std::string half = journaled.substr(0, journaled.size() / 2);
  const std::vector<Cut> cuts = {
      {"every journaled hit lost", "", 0},
      {"a line torn in the middle", half, std::count(half.begin(), half.end(), '\n')},
      {"garbage where the hit lines were", garbage, 0},
      {"garbage after the hit lines", journaled + garbage, 5},
  };
  for (const auto& cut : cuts) {
    CAPTURE(cut.name);
    cut_wal(root, synced_size, "");  // no fold of an earlier cut counts
    {
      std::ofstream(journal, std::ios::binary | std::ios::trunc) << cut.journal;
    }
    auto store = open_store_without_remotes(root);
    check_verifies_sound(store, 5);
    CHECK(counter(store, "stores") == 5);
    // Each complete line is one hit; a torn line or garbage counts nothing.
    CHECK(counter(store, "hits") == cut.hits);
    auto listed = store.list();
    REQUIRE(listed.ok());
    CHECK(listed->size() == 5);
  }

  // A cut after a fold: the fold's transaction is not synced either, and all of it goes.
  cut_wal(root, synced_size, "");
  {
    std::ofstream(journal, std::ios::binary | std::ios::trunc) << journaled;
  }
  {
    auto store = open_store_without_remotes(root);
    CHECK(counter(store, "hits") == 5);  // folded into the log
  }
  REQUIRE(fs::file_size(wal) > synced_size);
  cut_wal(root, synced_size + (fs::file_size(wal) - synced_size) / 2, "");
  {
    auto store = open_store_without_remotes(root);
    check_verifies_sound(store, 5);
    CHECK(counter(store, "hits") == 0);
  }

  // And the store goes on: every entry reads byte for byte, and a new entry is stored.
  read_all(root, stored, temp / "after");
  const auto more = put_kernels(root, temp / "more", 1, 100);
  auto store = open_store_without_remotes(root);
  check_verifies_sound(store, 6);
}

TEST_CASE("store::durability a hit process leaves the log in place for the next process") {
  TempDir temp;
  const fs::path root = temp / "cache";
  const StoredKernels stored = put_kernels(root, temp / "work", 2);
  read_all(root, stored, temp / "out");
  // Closing did not checkpoint (which would have synced and removed the log).
  CHECK(fs::exists(root / "index.db-wal"));
  auto store = open_store_without_remotes(root);
  CHECK(counter(store, "hits") == 2);
}

TEST_CASE("store::durability the log stays short across many one-hit processes, and no hit is lost") {
  // Each open is a new connection, like one `opcache exec` per kernel. SQLite
  // never restarted the log in that pattern, so it grew by every hit and each
  // process read all of it; a commit that leaves 64 frames now truncates it.
  TempDir temp;
  const fs::path root = temp / "cache";
  const StoredKernels stored = put_kernels(root, temp / "work", 1);
  constexpr int k_processes = 150;
  for (int i = 0; i < k_processes; ++i) {
    auto store = open_store_without_remotes(root);
    auto hit = store.get(stored.keys[0], temp / "out");
    REQUIRE(hit.ok());
    REQUIRE(hit->has_value());
  }
  const std::uintmax_t frame = 24 + 4096;
  CHECK(fs::file_size(root / "index.db-wal") <= 32 + 66 * frame);
  auto store = open_store_without_remotes(root);
  CHECK(counter(store, "hits") == k_processes);
}
