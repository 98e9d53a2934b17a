#include "support/scale_store.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "base/sha256.hpp"
#include "store/cache_root.hpp"
#include "store/index.hpp"
#include "store/local_store.hpp"
#include "support/corpus.hpp"

namespace opcache::bench {

namespace {

constexpr std::size_t k_rows_per_transaction = 50000;
constexpr std::int64_t k_bundle_bytes = 1000;  // every row's size, so the gc's count is exact
constexpr std::size_t k_object_bytes = 512;
constexpr std::size_t k_object_threads = 4;
constexpr int k_remain_percent = 90;  // the gc keeps 90 %: removes 10 %
constexpr std::uint64_t k_seed = 20261124;

std::string scale_key(std::size_t i) { return base::sha256_hex("scale-key-" + std::to_string(i)); }
std::string scale_digest(std::size_t i) { return base::sha256_hex("scale-object-" + std::to_string(i)); }

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The aging policy whose gc removes exactly 10 % (rounded up) of `entries`.
store::AgingPolicy ten_percent_policy(std::size_t entries) {
  return store::AgingPolicy{static_cast<std::int64_t>(entries) * k_bundle_bytes - 1, k_remain_percent, 0};
}

std::size_t entries_gc_removes(std::size_t entries) {
  const std::int64_t total = static_cast<std::int64_t>(entries) * k_bundle_bytes;
  const std::int64_t excess = total - ten_percent_policy(entries).target_bytes();
  return static_cast<std::size_t>((excess + k_bundle_bytes - 1) / k_bundle_bytes);
}

// Rows in key order (sequential appends to the primary key); entry i was last
// used at start + i ms, so the least recently used are 0, 1, 2, ...
void fill_rows(const fs::path& index_path, std::size_t entries) {
  auto index = must(store::Index::open(index_path, 60000), "open index " + index_path.string());
  must(index.database().exec("PRAGMA cache_size=-262144"), "cache_size");
  std::vector<std::pair<std::string, std::size_t>> keys(entries);
  for (std::size_t i = 0; i < entries; ++i) {
    keys[i] = {scale_key(i), i};
  }
  std::sort(keys.begin(), keys.end());
  const std::int64_t start = now_ms() - 2 * 86400000ll;
  const std::string scenario = R"({"device_mode":"single","phase":"train","soc":"Ascend910B1","toolchain":"8.0.RC2"})";
  for (std::size_t batch = 0; batch < entries; batch += k_rows_per_transaction) {
    auto transaction = must(index.begin(), "begin");
    for (std::size_t n = batch; n < std::min(entries, batch + k_rows_per_transaction); ++n) {
      const std::size_t i = keys[n].second;
      store::IndexEntry entry = corpus_shaped_entry(i, keys[n].first, scale_digest(i), scenario);
      entry.bundle_size = k_bundle_bytes;
      entry.raw_size = 3 * k_bundle_bytes;
      entry.created_ms = start + static_cast<std::int64_t>(i);
      entry.last_access_ms = entry.created_ms;
      entry.build_ms = 1000;
      must(index.upsert(entry), "insert row");
    }
    must(transaction.commit(), "commit");
    progress("  " + std::to_string(std::min(entries, batch + k_rows_per_transaction)) + "/" +
             std::to_string(entries) + " rows");
  }
}

// Object files of entries 0..count-1, written by a few threads, then synced.
void write_objects(const store::StoreLayout& layout, std::size_t count) {
  for (int shard = 0; shard < 256; ++shard) {
    static constexpr char k_hex[] = "0123456789abcdef";
    fs::create_directories(layout.objects() / std::string{k_hex[shard / 16], k_hex[shard % 16]});
  }
  std::atomic<std::size_t> next{0};
  auto work = [&](std::size_t thread) {
    std::mt19937_64 random(k_seed + thread);
    std::string bytes(k_object_bytes, '\0');
    for (std::size_t i = next++; i < count; i = next++) {
      for (auto& byte : bytes) {
        byte = static_cast<char>(random() & 0xff);
      }
      write_bytes(layout.object_path(scale_digest(i)), bytes);
    }
  };
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < k_object_threads; ++t) {
    pool.emplace_back(work, t);
  }
  for (auto& thread : pool) {
    thread.join();
  }
  ::sync();  // blocks allocated and on disk, as a store's objects are
}

Percentiles time_lookups(const fs::path& index_path, std::size_t entries, std::size_t lookups) {
  auto index = must(store::Index::open(index_path, 60000), "reopen index " + index_path.string());
  std::mt19937_64 random(k_seed);
  std::uniform_int_distribution<std::size_t> pick(0, entries - 1);
  for (std::size_t i = 0; i < std::min<std::size_t>(1000, lookups); ++i) {
    (void)must(index.lookup(scale_key(pick(random))), "lookup");
  }
  std::vector<double> samples;
  samples.reserve(lookups);
  for (std::size_t i = 0; i < lookups; ++i) {
    const std::string key = scale_key(pick(random));
    const auto t0 = SteadyClock::now();
    auto found = must(index.lookup(key), "lookup");
    const auto t1 = SteadyClock::now();
    if (!found || found->key != key) {
      fail("index lookup of present key " + key + " found nothing");
    }
    samples.push_back(micros_between(t0, t1));
  }
  return percentiles(std::move(samples));
}

}  // namespace

json ScaleResults::to_json() const {
  return {{"entries", entries},
          {"lookup_p50_us", lookup.p50},
          {"lookup_p99_us", lookup.p99},
          {"gc_removed", gc_removed},
          {"gc_seconds", gc_seconds},
          {"lookup", lookup.to_json()},
          {"fill_seconds", fill_seconds},
          {"objects_created", objects_created},
          {"index_bytes", index_bytes},
          {"gc_stopped_because", gc_stopped_because},
          {"method",
           "rows inserted directly through store::Index; object files only for the entries gc removes "
           "(512 random bytes each, synced before the gc); lookups by store::Index::lookup on a fresh "
           "connection; gc by LocalStore::collect_garbage (as `opcache gc`)"}};
}

ScaleResults run_scale_benchmark(const fs::path& root, std::size_t entries, std::size_t lookups) {
  ScaleResults results;
  results.entries = entries;
  store::StoreLayout layout(root);
  must(layout.create_directories(), "create " + root.string());
  results.objects_created = entries_gc_removes(entries);
  progress("scale: " + std::to_string(entries) + " rows into " + layout.index().string() + ", " +
           std::to_string(results.objects_created) + " object files");
  const auto fill_start = SteadyClock::now();
  fill_rows(layout.index(), entries);
  write_objects(layout, results.objects_created);
  results.fill_seconds = seconds_since(fill_start);
  std::error_code ec;
  results.index_bytes = fs::file_size(layout.index(), ec);

  progress("scale: " + std::to_string(lookups) + " lookups of random present keys");
  results.lookup = time_lookups(layout.index(), entries, lookups);

  progress("scale: gc removing 10 % of " + std::to_string(entries) + " entries");
  store::StoreOptions options;
  options.root = root;
  options.aging = ten_percent_policy(entries);
  auto local = must(store::LocalStore::open(options), "open store " + root.string());
  const auto gc_start = SteadyClock::now();
  auto report = must(local->collect_garbage(options.aging, store::GcMode::remove), "gc");
  results.gc_seconds = seconds_since(gc_start);
  results.gc_removed = report.entries_removed;
  results.gc_stopped_because = report.stopped_because;
  if (static_cast<std::size_t>(results.gc_removed) != results.objects_created) {
    fail("gc removed " + std::to_string(results.gc_removed) + " entries, expected " +
         std::to_string(results.objects_created) + " (" + report.stopped_because + ")");
  }
  return results;
}

}  // namespace opcache::bench
