// Aging's costs do not grow with the store (store/aging.cpp): the aging after
// a write removes at most StoreOptions::evictions_per_write entries and the
// next writes go on; gc evicts in batches of rows and unlinks the objects of
// each batch after its commit, leaving no row without its object; a pulled
// batch past the limit ages after each bundle it stores, as puts do.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/byte_stream.hpp"
#include "store/index.hpp"
#include "store/parallel_unlink.hpp"
#include "tests/store/aging_fixture.hpp"

// In the fixture's namespace, so its names (k_minute, make_kernels…) do not
// reach the other files of a unity batch as a using-directive would.
namespace opcache::test::aging {
namespace counter = opcache::store::counter;

namespace {

// What the aging after one write must do, step by step (the CANN rules with a
// bound): from the least recently used entry, stop at the target, at an entry
// used within min_idle, or after `bound` removals.
struct AgingModel {
  AgingPolicy policy;
  std::int64_t bound = 0;
  std::int64_t now = 0;
  std::int64_t bytes = 0;
  bool continuing = false;
  std::deque<opcache::Entry> lru;  // least recently used first

  // A write of `entry` at `now`; returns the keys it evicts.
  std::vector<std::string> write(const opcache::Entry& entry) {
    bytes += entry.bundle_size;
    std::vector<std::string> evicted;
    const bool ages = bytes > (continuing ? policy.target_bytes() : policy.max_bytes);
    while (ages && !lru.empty() && bytes > policy.target_bytes() &&
           now - lru.front().last_access_ms >= policy.min_idle_ms &&
           static_cast<std::int64_t>(evicted.size()) < bound) {
      bytes -= lru.front().bundle_size;
      evicted.push_back(lru.front().key);
      lru.pop_front();
    }
    continuing = ages && static_cast<std::int64_t>(evicted.size()) >= bound && bytes > policy.target_bytes();
    lru.push_back(entry);
    return evicted;
  }
};

// `count` entries of one real kernel, each under its own descriptor variant.
std::vector<BundleInput> variants_of(const KernelTriple& kernel, int count) {
  std::vector<BundleInput> inputs;
  for (int i = 0; i < count; ++i) {
    BundleInput input = fixed_stamp_input(kernel);
    input.descriptor["attrs"]["variant"] = i;
    inputs.push_back(std::move(input));
  }
  return inputs;
}

// Ten real kernels and the policy whose limit the first six just fit under
// (target 60 % of it, min idle half an hour); aging after a write removes at
// most k_bound entries.
constexpr std::int64_t k_bound = 2;
struct SixFit {
  std::vector<KernelTriple> kernels;
  AgingPolicy policy;
};
SixFit six_fit(const TempDir& temp) {
  SixFit fit{make_kernels(temp / "kernels", 10), {}};
  const std::vector<std::int64_t> sizes = bundle_sizes(fit.kernels, temp / "scratch");
  std::int64_t first_six = 0;
  for (std::size_t i = 0; i < 6; ++i) {
    first_six += sizes[i];
  }
  fit.policy = AgingPolicy{(first_six + 99) / 100 * 100, 60, k_half_hour};
  return fit;
}

}  // namespace

TEST_CASE("store::LocalStore aging after a write removes at most evictions_per_write entries, the next writes go on") {
  TempDir temp;
  const auto [kernels, policy] = six_fit(temp);
  ClockedStore store(temp / "cache", policy, k_bound);
  AgingModel model;
  model.policy = policy;
  model.bound = k_bound;
  for (std::size_t i = 0; i < 6; ++i) {
    model.now = k_t0 + static_cast<std::int64_t>(i) * k_minute;
    auto entry = store.put_at(kernels[i], model.now);
    CHECK(model.write(entry).empty());
  }
  REQUIRE(store.counter(counter::evictions) == 0);

  // Hours later, each write takes the store further down, two entries at a time.
  std::set<std::string> expected = store.keys();
  std::int64_t evictions = 0;
  std::vector<std::int64_t> per_write;
  for (std::size_t i = 6; i < kernels.size(); ++i) {
    model.now = k_t0 + 3 * 60 * k_minute + static_cast<std::int64_t>(i) * k_minute;
    auto entry = store.put_at(kernels[i], model.now);
    entry.last_access_ms = model.now;
    const auto evicted = model.write(entry);
    expected.insert(entry.key);
    for (const auto& key : evicted) {
      expected.erase(key);
    }
    evictions += static_cast<std::int64_t>(evicted.size());
    per_write.push_back(static_cast<std::int64_t>(evicted.size()));
    CHECK(store.keys() == expected);
    CHECK(store.counter(counter::evictions) == evictions);
    CHECK(store.counter(counter::store_bytes) == model.bytes);
  }
  // The first write over the limit was cut short by the bound with the store
  // still above its target; a later one reached the target.
  REQUIRE(per_write.size() >= 3);
  CHECK(per_write[0] == k_bound);
  CHECK(per_write[1] == k_bound);
  CHECK(*std::max_element(per_write.begin(), per_write.end()) == k_bound);
  CHECK(evictions > k_bound);
  CHECK(store.counter(counter::store_bytes) <= policy.max_bytes);
  CHECK(store.warnings.empty());

  SUBCASE("an explicit gc is not bounded") {
    *store.now = k_t0 + 10 * 60 * k_minute;
    auto report = store.gc(AgingPolicy{1, 1, k_half_hour});
    CHECK(report.entries_removed == static_cast<std::int64_t>(expected.size()));
    CHECK(store.keys().empty());
  }
}

TEST_CASE("store::LocalStore adopt_batch past the limit ages after each bundle it stores, as puts do") {
  TempDir temp;
  const auto [kernels, policy] = six_fit(temp);
  ClockedStore store(temp / "cache", policy, k_bound);
  for (std::size_t i = 0; i < 6; ++i) {
    store.put_at(kernels[i], k_t0 + static_cast<std::int64_t>(i) * k_minute);
  }
  REQUIRE(store.counter(counter::evictions) == 0);

  // Hours later a pull brings the other four in one batch: one aging pass
  // (at most k_bound evictions) would leave the store above its limit.
  *store.now = k_t0 + 3 * 60 * k_minute;
  std::vector<opcache::store::VerifiedBundle> batch;
  for (std::size_t i = 6; i < kernels.size(); ++i) {
    const BundleInput input = fixed_stamp_input(kernels[i]);
    auto file = store->create_temp();
    REQUIRE(file.ok());
    opcache::base::FdSink sink(file->fd(), file->temp_path());
    auto written = opcache::store::write_bundle(input, sink);
    REQUIRE(written.ok());
    auto bundle = store->verify_for_adoption(std::move(*file), written->manifest.key,
                                             opcache::base::Durability::deferred, {});
    REQUIRE(bundle.ok());
    batch.push_back(std::move(*bundle));
  }
  const auto outcomes =
      store->adopt_batch(std::move(batch), ReplacePolicy::keep_existing, opcache::base::Durability::deferred);
  for (const auto& outcome : outcomes) {
    REQUIRE_MESSAGE(outcome.ok(), outcome.error().message());
    CHECK(outcome->stored);
  }
  CHECK(store.counter(counter::evictions) > k_bound);
  CHECK(store.counter(counter::store_bytes) <= policy.max_bytes);
  CHECK(store.keys().size() == 10 - static_cast<std::size_t>(store.counter(counter::evictions)));
  CHECK(store.warnings.empty());
}

TEST_CASE("store::LocalStore::collect_garbage evicts more than one batch, keeps pinned entries, leaves no row without its object") {
  TempDir temp;
  auto kernel = make_kernel(temp / "kernel", "relu", 24);
  constexpr int k_entries = 300;  // more than one page and one transaction (256 rows)
  ClockedStore store(temp / "cache", AgingPolicy{-1, 50, 0});
  std::vector<opcache::Entry> entries;
  auto inputs = variants_of(kernel, k_entries);
  for (int i = 0; i < k_entries; ++i) {
    *store.now = k_t0 + i;
    auto put = store->put(inputs[static_cast<std::size_t>(i)], ReplacePolicy::keep_existing);
    REQUIRE(put.ok());
    entries.push_back(store.entry(put->key));
  }
  const std::set<int> pinned = {0, 100, 255, 256, 299};
  for (int i : pinned) {
    REQUIRE(store->set_pinned(entries[static_cast<std::size_t>(i)].key, true).ok());
  }
  std::vector<std::string> lru;  // the unpinned ones, least recently used first
  std::set<std::string> survivors;
  for (int i = 0; i < k_entries; ++i) {
    const std::string& key = entries[static_cast<std::size_t>(i)].key;
    if (pinned.count(i) != 0) {
      survivors.insert(key);
    } else {
      lru.push_back(key);
    }
  }

  *store.now = k_t0 + 60 * k_minute;
  auto report = store.gc(AgingPolicy{1, 1, 0});
  CHECK(keys_of(report.removed) == lru);
  CHECK(report.stopped_because == "no more unpinned entries");
  CHECK(store.keys() == survivors);
  CHECK(store.counter(counter::evictions) == static_cast<std::int64_t>(lru.size()));
  CHECK(store.counter(counter::store_entries) == static_cast<std::int64_t>(survivors.size()));
  // Every row left has its object, every removed entry's object is gone, and
  // nothing was left behind in tmp/ on the way.
  for (const auto& key : survivors) {
    CHECK(store.object_exists(store.entry(key)));
  }
  CHECK(count_regular_files(temp / "cache" / "objects") == survivors.size());
  CHECK(count_regular_files(temp / "cache" / "tmp") == 0);
  auto verified = store->verify(false);
  REQUIRE(verified.ok());
  CHECK(verified->problems.empty());
}

TEST_CASE("store::unlink_all removes every file, counts a missing one as done, and reports one it cannot remove") {
  TempDir temp;
  std::vector<fs::path> paths;
  for (int i = 0; i < 100; ++i) {
    paths.push_back(temp / ("f" + std::to_string(i)));
    write_text(paths.back(), "bytes " + std::to_string(i));
  }
  paths.push_back(temp / "never-there");
  CHECK(opcache::store::unlink_all(paths).ok());
  CHECK(count_regular_files(temp.path()) == 0);

  fs::create_directories(temp / "a-directory");
  write_text(temp / "last", "x");
  auto status = opcache::store::unlink_all({temp / "a-directory", temp / "last"});
  REQUIRE_FALSE(status.ok());
  CHECK(status.error().message().find("a-directory") != std::string::npos);
  CHECK_FALSE(fs::exists(temp / "last"));
  CHECK(opcache::store::unlink_all({}).ok());
}

}  // namespace opcache::test::aging
