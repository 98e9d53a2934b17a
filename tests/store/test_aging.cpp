// Aging of a local store (store/aging.cpp): CANN's rules with a controllable
// clock and small limits. Least recently used entries idle for at least
// min_idle are removed until the store is at most limit × ratio; aging stops
// at the first entry used within min_idle; pinned entries stay; -1 disables
// aging and access-time updates; aging also runs after writes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/scenario.hpp"
#include "store/aging.hpp"
#include "store/bundle_writer.hpp"
#include "store/index.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"
#include "base/lock_file.hpp"
#include "store/scenario.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/store/aging_fixture.hpp"

// In the fixture's namespace, so its names (k_minute, make_kernels…) do not
// reach the other files of a unity batch as a using-directive would.
namespace opcache::test::aging {

TEST_CASE("store::AgingPolicy::target_bytes is limit × ratio / 100, rounded down") {
  CHECK(AgingPolicy{1000, 50, 0}.target_bytes() == 500);
  CHECK(AgingPolicy{-1, 50, 0}.enabled() == false);
  CHECK(AgingPolicy{0, 50, 0}.enabled() == true);
  // 1 MB (op_cache.ini max_op_cache_size=1) at 50 % keeps 512 KiB exactly.
  CHECK(AgingPolicy{1ll << 20, 50, 0}.target_bytes() == 524288);
  CHECK(AgingPolicy{1ll << 20, 80, 0}.target_bytes() == 838860);
  CHECK(AgingPolicy{500ll << 20, 50, 0}.target_bytes() == 262144000);
  CHECK(AgingPolicy{99, 100, 0}.target_bytes() == 99);
  // The largest accepted size (2^40 MB) does not overflow.
  CHECK(AgingPolicy{1ll << 60, 100, 0}.target_bytes() == 1ll << 60);
}

TEST_CASE("store::LocalStore::collect_garbage removes least recently used idle entries until the target") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels");
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, k_half_hour});  // no automatic aging here

  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  // Aging is off for this store, so hits keep the stored access times; use an
  // aging-enabled store over the same root to touch e0 and e1.
  {
    ClockedStore toucher(temp / "cache", AgingPolicy{1ll << 40, 50, k_half_hour});
    toucher.get_at(entries[0].key, k_t0 + 20 * k_minute, temp / "out0");
    toucher.get_at(entries[1].key, k_t0 + 21 * k_minute, temp / "out1");
    CHECK(toucher.entry(entries[0].key).last_access_ms == k_t0 + 20 * k_minute);
    CHECK(toucher.entry(entries[1].key).last_access_ms == k_t0 + 21 * k_minute);
  }
  // Least recently used order: e2 .. e11, then e0, e1.
  std::vector<opcache::Entry> lru(entries.begin() + 2, entries.end());
  lru.push_back(entries[0]);
  lru.push_back(entries[1]);

  const std::int64_t total = sum_sizes(entries);
  CHECK(store.counter(opcache::store::counter::store_bytes) == total);
  CHECK(store.counter(opcache::store::counter::store_entries) == 12);

  // A limit just under the total (a multiple of 100, so the target is exact).
  const std::int64_t limit = (total - 1) / 100 * 100;
  const AgingPolicy policy{limit, 40, k_half_hour};
  const std::int64_t target = limit * 40 / 100;
  REQUIRE(policy.target_bytes() == target);
  const std::size_t expected_count = prefix_reaching(lru, total, target);
  REQUIRE(expected_count > 2);            // the case is meaningful: several go, ...
  REQUIRE(expected_count < lru.size());   // ... not all
  std::vector<opcache::Entry> expected(lru.begin(), lru.begin() + static_cast<std::ptrdiff_t>(expected_count));

  *store.now = k_t0 + 2 * 60 * k_minute;  // everything idle for over an hour
  auto report = store.gc(policy);
  CHECK(keys_of(report.removed) == keys_of(expected));
  CHECK(report.aging_enabled);
  CHECK_FALSE(report.dry_run);
  CHECK(report.limit_bytes == limit);
  CHECK(report.target_bytes == target);
  CHECK(report.min_idle_ms == k_half_hour);
  CHECK(report.entries_before == 12);
  CHECK(report.bytes_before == total);
  CHECK(report.entries_removed == static_cast<std::int64_t>(expected_count));
  CHECK(report.bytes_removed == sum_sizes(expected));
  CHECK(report.bytes_after == total - sum_sizes(expected));
  CHECK(report.stopped_because == "reached the target size");
  // At most the target, and one removal fewer would not have been enough.
  CHECK(report.bytes_after <= target);
  CHECK(report.bytes_after + expected.back().bundle_size > target);

  std::set<std::string> survivors;
  for (std::size_t i = expected_count; i < lru.size(); ++i) {
    survivors.insert(lru[i].key);
  }
  CHECK(store.keys() == survivors);
  CHECK(survivors.count(entries[0].key) == 1);
  CHECK(survivors.count(entries[1].key) == 1);
  for (const auto& gone : expected) {
    CHECK_FALSE(store.object_exists(gone));
  }
  for (std::size_t i = expected_count; i < lru.size(); ++i) {
    CHECK(store.object_exists(lru[i]));
  }
  CHECK(count_regular_files(temp / "cache" / "objects") == survivors.size());
  CHECK(store.counter(opcache::store::counter::evictions) == static_cast<std::int64_t>(expected_count));
  CHECK(store.counter(opcache::store::counter::store_bytes) == report.bytes_after);
  CHECK(store.counter(opcache::store::counter::store_entries) == static_cast<std::int64_t>(survivors.size()));
  CHECK(store.counter(opcache::store::counter::removals) == 0);

  // Now within the limit: a second run removes nothing.
  auto again = store.gc(policy);
  CHECK(again.removed.empty());
  CHECK(again.stopped_because == "the store is within its limit");
  CHECK(store.counter(opcache::store::counter::evictions) == static_cast<std::int64_t>(expected_count));
}

TEST_CASE("store::LocalStore::collect_garbage stops at the first entry used within min_idle") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 8);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, k_half_hour});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  const std::int64_t total = sum_sizes(entries);
  // A limit far below the size: everything would go, but e4.. are too recent.
  // e3 is idle exactly 30 minutes (it qualifies), e4 29 minutes.
  *store.now = k_t0 + 3 * k_minute + k_half_hour;
  const AgingPolicy policy{100, 50, k_half_hour};
  auto report = store.gc(policy);
  std::vector<opcache::Entry> expected(entries.begin(), entries.begin() + 4);
  CHECK(keys_of(report.removed) == keys_of(expected));
  CHECK(report.stopped_because == "the least recently used remaining entry was used 1740 s ago (min idle 1800 s)");
  CHECK(report.bytes_after == total - sum_sizes(expected));
  CHECK(report.bytes_after > report.limit_bytes);  // still over the limit
  CHECK(store.keys() == std::set<std::string>{entries[4].key, entries[5].key, entries[6].key, entries[7].key});
  CHECK(store.counter(opcache::store::counter::evictions) == 4);

  SUBCASE("later, the rest qualifies") {
    *store.now = k_t0 + 7 * k_minute + k_half_hour;
    auto later = store.gc(policy);
    CHECK(keys_of(later.removed) ==
          std::vector<std::string>{entries[4].key, entries[5].key, entries[6].key, entries[7].key});
    CHECK(later.stopped_because == "reached the target size");
    CHECK(later.bytes_after == 0);
    CHECK(store.keys().empty());
    CHECK(store.counter(opcache::store::counter::store_bytes) == 0);
    CHECK(store.counter(opcache::store::counter::evictions) == 8);
  }
}

TEST_CASE("store::LocalStore::collect_garbage never removes pinned entries, even the oldest") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 6);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, 0});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  auto pinned = store->set_pinned(entries[0].key, true);
  REQUIRE(pinned.ok());
  CHECK(*pinned);
  REQUIRE(store->set_pinned(entries[3].key, true).ok());
  auto absent = store->set_pinned(std::string(64, 'e'), true);
  REQUIRE(absent.ok());
  CHECK_FALSE(*absent);

  *store.now = k_t0 + 24 * 60 * k_minute;
  const AgingPolicy policy{1, 1, 0};  // remove everything that may go
  auto report = store.gc(policy);
  CHECK(keys_of(report.removed) ==
        std::vector<std::string>{entries[1].key, entries[2].key, entries[4].key, entries[5].key});
  CHECK(report.stopped_because == "no more unpinned entries");
  CHECK(report.bytes_after == entries[0].bundle_size + entries[3].bundle_size);
  CHECK(store.keys() == std::set<std::string>{entries[0].key, entries[3].key});
  CHECK(store.object_exists(entries[0]));
  CHECK(store.object_exists(entries[3]));
  CHECK(store.entry(entries[0].key).pinned);

  // Unpinned, the oldest goes first.
  REQUIRE(store->set_pinned(entries[0].key, false).ok());
  auto after_unpin = store.gc(policy);
  CHECK(keys_of(after_unpin.removed) == std::vector<std::string>{entries[0].key});
  CHECK(store.keys() == std::set<std::string>{entries[3].key});
  CHECK(store.counter(opcache::store::counter::evictions) == 5);
}

TEST_CASE("store::LocalStore::collect_garbage dry run reports the same set and removes nothing") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 8);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, k_half_hour});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  const std::int64_t total = sum_sizes(entries);
  const std::int64_t limit = (total - 1) / 100 * 100;
  const AgingPolicy policy{limit, 50, k_half_hour};
  *store.now = k_t0 + 4 * 60 * k_minute;

  auto dry = store.gc(policy, GcMode::dry_run);
  CHECK(dry.dry_run);
  const std::size_t expected_count = prefix_reaching(entries, total, policy.target_bytes());
  REQUIRE(expected_count >= 2);
  CHECK(keys_of(dry.removed) ==
        keys_of(std::vector<opcache::Entry>(entries.begin(), entries.begin() + static_cast<std::ptrdiff_t>(expected_count))));
  CHECK(dry.entries_removed == static_cast<std::int64_t>(expected_count));
  CHECK(dry.stopped_because == "reached the target size");
  // Nothing changed.
  CHECK(store.keys().size() == entries.size());
  for (const auto& entry : entries) {
    CHECK(store.object_exists(entry));
  }
  CHECK(store.counter(opcache::store::counter::evictions) == 0);
  CHECK(store.counter(opcache::store::counter::store_bytes) == total);

  auto real = store.gc(policy);
  CHECK_FALSE(real.dry_run);
  CHECK(keys_of(real.removed) == keys_of(dry.removed));
  CHECK(real.bytes_after == dry.bytes_after);
  CHECK(store.counter(opcache::store::counter::evictions) == static_cast<std::int64_t>(expected_count));
}

TEST_CASE("store::LocalStore with max_bytes -1 never ages and hits do not update the access time") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 4);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, k_half_hour});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  store.get_at(entries[0].key, k_t0 + 10 * 60 * k_minute, temp / "out");
  auto after_hit = store.entry(entries[0].key);
  CHECK(after_hit.hits == 1);
  CHECK(after_hit.last_access_ms == k_t0);  // not updated
  CHECK(store.counter(opcache::store::counter::hits) == 1);

  *store.now = k_t0 + 100 * 60 * k_minute;
  auto report = store.gc(AgingPolicy{-1, 50, 0});
  CHECK_FALSE(report.aging_enabled);
  CHECK(report.removed.empty());
  CHECK(report.limit_bytes == -1);
  CHECK(report.target_bytes == -1);
  CHECK(report.bytes_before == sum_sizes(entries));
  CHECK(report.bytes_after == sum_sizes(entries));
  CHECK(report.stopped_because == "aging is disabled (max_op_cache_size = -1)");
  CHECK(store.keys().size() == 4);
  CHECK(store.counter(opcache::store::counter::evictions) == 0);

  SUBCASE("with aging enabled, a hit updates the access time") {
    ClockedStore aging(temp / "cache", AgingPolicy{1ll << 30, 50, k_half_hour});
    aging.get_at(entries[1].key, k_t0 + 42 * k_minute, temp / "out1");
    auto touched = aging.entry(entries[1].key);
    CHECK(touched.hits == 1);
    CHECK(touched.last_access_ms == k_t0 + 42 * k_minute);
    CHECK(touched.created_ms == k_t0 + k_minute);
  }
}

TEST_CASE("store::LocalStore ages automatically after a put that grows it past the limit, not on hits") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 8);
  const std::vector<std::int64_t> sizes = bundle_sizes(kernels, temp / "scratch");
  std::int64_t first_six = 0;
  for (int i = 0; i < 6; ++i) {
    first_six += sizes[static_cast<std::size_t>(i)];
  }
  // e0..e5 fit; e6 takes the store over the limit.
  const std::int64_t limit = (first_six + 99) / 100 * 100;
  REQUIRE(limit < first_six + sizes[6]);
  const AgingPolicy policy{limit, 50, k_half_hour};

  ClockedStore store(temp / "cache", policy);
  std::vector<opcache::Entry> entries;
  for (int i = 0; i < 6; ++i) {
    entries.push_back(store.put_at(kernels[static_cast<std::size_t>(i)], k_t0 + i * k_minute));
    CHECK(entries.back().bundle_size == sizes[static_cast<std::size_t>(i)]);
  }
  CHECK(store.counter(opcache::store::counter::evictions) == 0);
  CHECK(store.counter(opcache::store::counter::store_bytes) == first_six);

  SUBCASE("a put of recently used entries over the limit removes nothing (min idle)") {
    auto e6 = store.put_at(kernels[6], k_t0 + 10 * k_minute);
    CHECK(store.keys().size() == 7);
    CHECK(store.counter(opcache::store::counter::evictions) == 0);
    CHECK(store.counter(opcache::store::counter::store_bytes) == first_six + e6.bundle_size);

    // An hour later a hit does not age (no scan on the hit path) ...
    store.get_at(entries[5].key, k_t0 + 70 * k_minute, temp / "out");
    CHECK(store.keys().size() == 7);
    CHECK(store.counter(opcache::store::counter::evictions) == 0);

    // ... but the next write does: LRU order e0..e4, e6, e5 (just hit).
    auto e7 = store.put_at(kernels[7], k_t0 + 71 * k_minute);
    std::vector<opcache::Entry> lru(entries.begin(), entries.begin() + 5);
    lru.push_back(e6);
    const std::int64_t total = first_six + e6.bundle_size + e7.bundle_size;
    const std::size_t count = prefix_reaching(lru, total, policy.target_bytes());
    REQUIRE(count >= 1);
    std::set<std::string> expected_left{entries[5].key, e7.key};
    for (std::size_t i = count; i < lru.size(); ++i) {
      expected_left.insert(lru[i].key);
    }
    CHECK(store.keys() == expected_left);
    CHECK(store.counter(opcache::store::counter::evictions) == static_cast<std::int64_t>(count));
    CHECK(store.counter(opcache::store::counter::store_bytes) <= policy.target_bytes());
    for (std::size_t i = 0; i < count; ++i) {
      CHECK_FALSE(store.object_exists(lru[i]));
    }
  }
  SUBCASE("a put after the old entries went idle evicts them without an explicit gc") {
    auto e6 = store.put_at(kernels[6], k_t0 + 2 * 60 * k_minute);
    const std::int64_t total = first_six + e6.bundle_size;
    const std::size_t count = prefix_reaching(entries, total, policy.target_bytes());
    REQUIRE(count >= 1);
    REQUIRE(count < entries.size());
    std::set<std::string> expected_left{e6.key};
    std::int64_t left_bytes = e6.bundle_size;
    for (std::size_t i = count; i < entries.size(); ++i) {
      expected_left.insert(entries[i].key);
      left_bytes += entries[i].bundle_size;
    }
    CHECK(store.keys() == expected_left);
    CHECK(store.counter(opcache::store::counter::evictions) == static_cast<std::int64_t>(count));
    CHECK(store.counter(opcache::store::counter::store_bytes) == left_bytes);
    CHECK(left_bytes <= policy.target_bytes());
    CHECK(left_bytes + entries[count - 1].bundle_size > policy.target_bytes());
    for (std::size_t i = 0; i < count; ++i) {
      CHECK_FALSE(store.object_exists(entries[i]));
    }
    CHECK(store.warnings.empty());
  }
}

TEST_CASE("store::LocalStore keeps the store_bytes and store_entries counters exact") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 5);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, 0});
  using namespace opcache::store::counter;
  CHECK(store.counter(store_bytes) == 0);
  CHECK(store.counter(store_entries) == 0);

  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  std::int64_t expected = sum_sizes(entries);
  CHECK(store.counter(store_bytes) == expected);
  CHECK(store.counter(store_entries) == 5);
  auto stats = store->stats();
  REQUIRE(stats.ok());
  CHECK(stats->totals.bundle_bytes == expected);
  CHECK(stats->totals.entries == 5);

  // The same put again is already present: nothing changes.
  store.put_at(kernels[0], k_t0 + 10 * k_minute);
  CHECK(store.counter(store_bytes) == expected);
  CHECK(store.counter(already_present) == 1);

  // Remove one.
  auto removed = store->remove(entries[1].key);
  REQUIRE(removed.ok());
  CHECK(*removed);
  expected -= entries[1].bundle_size;
  CHECK(store.counter(store_bytes) == expected);
  CHECK(store.counter(store_entries) == 4);
  CHECK(store.counter(removals) == 1);
  CHECK_FALSE(store.object_exists(entries[1]));

  // Replace one with a bundle of another size (an extra member).
  BundleInput bigger = fixed_stamp_input(kernels[2]);
  write_text(temp / "extra.bin", std::string(4096, 'x') + "tail");
  bigger.members.push_back(MemberSource{"extra.bin", temp / "extra.bin", ""});
  *store.now = k_t0 + 20 * k_minute;
  auto replaced = store->put(bigger, ReplacePolicy::replace);
  REQUIRE(replaced.ok());
  CHECK(replaced->key == entries[2].key);
  CHECK(replaced->bundle_bytes != entries[2].bundle_size);
  expected += replaced->bundle_bytes - entries[2].bundle_size;
  CHECK(store.counter(store_bytes) == expected);
  CHECK(store.counter(store_entries) == 4);
  CHECK_FALSE(store.object_exists(entries[2]));
  CHECK(store.object_exists(store.entry(entries[2].key)));

  // Evict everything but the replaced entry (the newest access).
  *store.now = k_t0 + 60 * k_minute;
  auto report = store.gc(AgingPolicy{1, 100, 45 * k_minute});
  CHECK(keys_of(report.removed) == std::vector<std::string>{entries[0].key, entries[3].key, entries[4].key});
  CHECK(report.stopped_because == "the least recently used remaining entry was used 2400 s ago (min idle 2700 s)");
  CHECK(store.counter(evictions) == 3);
  CHECK(store.counter(store_bytes) == replaced->bundle_bytes);
  CHECK(store.counter(store_entries) == 1);
  CHECK(store.counter(removals) == 1);
  CHECK(count_regular_files(temp / "cache" / "objects") == 1);
}

TEST_CASE("store::LocalStore::clear removes every entry, pinned ones too, and leaves a working store") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 6);
  ClockedStore store(temp / "cache", AgingPolicy{1ll << 30, 50, k_half_hour});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < 5; ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  REQUIRE(store->set_pinned(entries[0].key, true).ok());
  REQUIRE(store->set_pinned(entries[4].key, true).ok());

  auto report = store->clear();
  REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message()));
  CHECK(report->entries_removed == 5);
  CHECK(report->bytes_removed == sum_sizes(entries));
  CHECK(store.keys().empty());
  CHECK(count_regular_files(temp / "cache" / "objects") == 0);
  CHECK(store.counter(opcache::store::counter::store_bytes) == 0);
  CHECK(store.counter(opcache::store::counter::store_entries) == 0);
  CHECK(store.counter(opcache::store::counter::removals) == 5);
  CHECK(store.counter(opcache::store::counter::evictions) == 0);

  // Still a working store: put and get again.
  auto again = store.put_at(kernels[5], k_t0 + 10 * k_minute);
  auto old = store.put_at(kernels[0], k_t0 + 11 * k_minute);
  CHECK(old.key == entries[0].key);
  CHECK_FALSE(old.pinned);
  store.get_at(again.key, k_t0 + 12 * k_minute, temp / "out");
  CHECK(opcache::test::read_text(temp / "out" / kernels[5].object.filename()) ==
        opcache::test::read_text(kernels[5].object));
  CHECK(store.keys() == std::set<std::string>{again.key, old.key});
  CHECK(store.counter(opcache::store::counter::store_entries) == 2);

  auto empty_clear = store->clear();
  REQUIRE(empty_clear.ok());
  CHECK(empty_clear->entries_removed == 2);
  auto nothing = store->clear();
  REQUIRE(nothing.ok());
  CHECK(nothing->entries_removed == 0);
  CHECK(nothing->bytes_removed == 0);
}

TEST_CASE("store::LocalStore::collect_garbage skips when another process is aging the store (gc.lock held)") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 4);
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, 0});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  *store.now = k_t0 + 60 * k_minute;
  const AgingPolicy policy{1, 50, 0};
  {
    // flock locks conflict between open file descriptions, even in one process.
    auto held = opcache::base::LockFile::try_acquire(temp / "cache" / "locks" / "gc.lock");
    REQUIRE(held.ok());
    REQUIRE(held->has_value());

    auto skipped = store.gc(policy);
    CHECK(skipped.removed.empty());
    CHECK(skipped.entries_removed == 0);
    CHECK(skipped.stopped_because == "another process is aging this store right now");
    CHECK(store.keys().size() == 4);
    CHECK(store.counter(opcache::store::counter::evictions) == 0);

    // A dry run does not need the lock.
    auto dry = store.gc(policy, GcMode::dry_run);
    CHECK(keys_of(dry.removed) == keys_of(entries));

    // Nor does a write fail when its automatic aging is skipped.
    ClockedStore aging(temp / "cache", policy);
    auto extra = make_kernel(temp / "kernels" / "extra", "square", 99);
    aging.put_at(extra, k_t0 + 61 * k_minute);
    CHECK(aging.keys().size() == 5);
    CHECK(aging.warnings.empty());
  }
  // Released: aging proceeds.
  *store.now = k_t0 + 62 * k_minute;
  auto report = store.gc(policy);
  CHECK(report.entries_removed == 5);
  CHECK(store.keys().empty());
}

TEST_CASE("store::LocalStore::collect_garbage in another process keeps an entry a live process used within min_idle") {
  TempDir temp;
  auto kernels = make_kernels(temp / "kernels", 3);
  // Two stores on one root stand for two processes; `user` stays open (a
  // long-running job) and does nothing after its hit.
  ClockedStore user(temp / "cache", AgingPolicy{1ll << 40, 50, k_half_hour});
  std::vector<opcache::Entry> entries;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    entries.push_back(user.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute));
  }
  user.get_at(entries[0].key, k_t0 + 2 * 60 * k_minute, temp / "out");

  ClockedStore ager(temp / "cache", AgingPolicy{-1, 50, k_half_hour});
  *ager.now = k_t0 + 2 * 60 * k_minute + k_minute;
  auto report = ager.gc(AgingPolicy{1, 50, k_half_hour});
  CHECK(keys_of(report.removed) == std::vector<std::string>{entries[1].key, entries[2].key});
  CHECK(report.stopped_because == "the least recently used remaining entry was used 60 s ago (min idle 1800 s)");
  CHECK(ager.present(entries[0].key));
  CHECK(ager.object_exists(entries[0]));
}

}  // namespace opcache::test::aging
