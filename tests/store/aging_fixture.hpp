// Shared by the aging tests (test_aging.cpp, test_aging_bounds.cpp): real
// kernels, bundle inputs with fixed bytes, and a store whose clock the test
// advances.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache/scenario.hpp"
#include "store/aging.hpp"
#include "store/bundle_writer.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/temp_dir.hpp"

namespace opcache::test::aging {

using opcache::ReplacePolicy;
using opcache::store::AgingPolicy;
using opcache::store::BundleInput;
using opcache::store::GcMode;
using opcache::store::LocalStore;
using opcache::store::MemberSource;
using opcache::store::StoreOptions;
using opcache::test::KernelTriple;
using opcache::test::make_kernel;
using opcache::test::TempDir;
using opcache::test::write_text;
namespace fs = std::filesystem;

constexpr std::int64_t k_t0 = 1'700'000'000'000;  // Unix ms
constexpr std::int64_t k_minute = 60'000;
constexpr std::int64_t k_half_hour = 30 * k_minute;

// 12 real kernels (4 ops × 3 lengths), compiled once per case.
inline std::vector<KernelTriple> make_kernels(const fs::path& dir, int count = 12) {
  const char* ops[] = {"square", "relu", "neg", "add"};
  std::vector<KernelTriple> kernels;
  for (int i = 0; i < count; ++i) {
    kernels.push_back(make_kernel(dir / ("k" + std::to_string(i)), ops[i % 4], 16 + 8 * (i / 4) + i));
  }
  return kernels;
}

// Bundle input (opcache::test::input_for) with a fixed creation stamp, so the
// same kernel gives the same bundle bytes (and size) in every store.
inline BundleInput fixed_stamp_input(const KernelTriple& kernel) {
  BundleInput input = opcache::test::input_for(kernel);
  input.created = "2026-01-02T03:04:05Z";
  return input;
}

// A store whose clock is a shared counter the test advances.
struct ClockedStore {
  ClockedStore(const fs::path& root, AgingPolicy aging,
               std::int64_t evictions_per_write = opcache::store::k_evictions_per_write)
      : now(std::make_shared<std::int64_t>(k_t0)) {
    StoreOptions options;
    options.root = root;
    options.aging = aging;
    options.evictions_per_write = evictions_per_write;
    options.clock = [now = now] { return *now; };
    options.warn = [this](const std::string& message) { warnings.push_back(message); };
    auto opened = LocalStore::open(std::move(options));
    REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
    store = std::move(opened).value();
  }
  ClockedStore(const ClockedStore&) = delete;
  ClockedStore& operator=(const ClockedStore&) = delete;

  LocalStore* operator->() { return store.get(); }

  // Stores `kernel` at time `at_ms`; returns the entry.
  opcache::Entry put_at(const KernelTriple& kernel, std::int64_t at_ms,
                        ReplacePolicy policy = ReplacePolicy::keep_existing) {
    *now = at_ms;
    auto put = store->put(fixed_stamp_input(kernel), policy);
    REQUIRE_MESSAGE(put.ok(), (put.ok() ? "" : put.error().message()));
    return entry(put->key);
  }

  // Reads `key` back at time `at_ms` (a hit).
  void get_at(const std::string& key, std::int64_t at_ms, const fs::path& out) {
    *now = at_ms;
    auto got = store->get(key, out);
    REQUIRE_MESSAGE(got.ok(), (got.ok() ? "" : got.error().message()));
    REQUIRE(got->has_value());
  }

  opcache::Entry entry(const std::string& key) {
    // stats() writes hits a store may batch in memory before the index shows them.
    REQUIRE(store->stats().ok());
    auto found = store->lookup(key);
    REQUIRE(found.ok());
    REQUIRE(found->has_value());
    return **found;
  }

  bool present(const std::string& key) {
    auto found = store->lookup(key);
    REQUIRE(found.ok());
    return found->has_value();
  }

  opcache::GcReport gc(const AgingPolicy& policy, GcMode mode = GcMode::remove) {
    auto report = store->collect_garbage(policy, mode);
    REQUIRE_MESSAGE(report.ok(), (report.ok() ? "" : report.error().message()));
    return *report;
  }

  std::int64_t counter(const std::string& name) {
    auto stats = store->stats();
    REQUIRE(stats.ok());
    auto it = stats->counters.find(name);
    return it == stats->counters.end() ? 0 : it->second;
  }

  std::set<std::string> keys() {
    auto entries = store->list({});
    REQUIRE(entries.ok());
    std::set<std::string> keys;
    for (const auto& entry : *entries) {
      keys.insert(entry.key);
    }
    return keys;
  }

  bool object_exists(const opcache::Entry& entry) const {
    return fs::exists(store->layout().object_path(entry.digest));
  }

  std::shared_ptr<std::int64_t> now;
  std::vector<std::string> warnings;
  std::unique_ptr<LocalStore> store;
};

inline std::vector<std::string> keys_of(const std::vector<opcache::Entry>& entries) {
  std::vector<std::string> keys;
  for (const auto& entry : entries) {
    keys.push_back(entry.key);
  }
  return keys;
}

inline std::int64_t sum_sizes(const std::vector<opcache::Entry>& entries) {
  std::int64_t total = 0;
  for (const auto& entry : entries) {
    total += entry.bundle_size;
  }
  return total;
}

// The smallest prefix of `lru` whose removal brings `total` to at most `target`.
inline std::size_t prefix_reaching(const std::vector<opcache::Entry>& lru, std::int64_t total, std::int64_t target) {
  std::size_t count = 0;
  while (total > target && count < lru.size()) {
    total -= lru[count++].bundle_size;
  }
  return count;
}

// How many regular files are under `dir`, recursively.
inline std::size_t count_regular_files(const fs::path& dir) {
  std::size_t count = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    count += entry.is_regular_file() ? 1 : 0;
  }
  return count;
}

// The bundle size of each kernel, measured in a scratch store under `dir`
// (inputs are deterministic, so every store stores the same bytes).
inline std::vector<std::int64_t> bundle_sizes(const std::vector<KernelTriple>& kernels, const fs::path& dir) {
  ClockedStore scratch(dir, AgingPolicy{-1, 50, 0});
  std::vector<std::int64_t> sizes;
  for (const auto& kernel : kernels) {
    sizes.push_back(scratch.put_at(kernel, k_t0).bundle_size);
  }
  return sizes;
}

}  // namespace opcache::test::aging
