// The server's in-memory bundle cache (server/bundle_cache.hpp): bounded by
// bytes, least recently used evicted first, replace and erase by key.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "server/bundle_cache.hpp"

namespace {

using opcache::server::BundleCache;
using opcache::server::CachedBundle;

constexpr std::size_t k_overhead = BundleCache::k_entry_overhead;

std::shared_ptr<const CachedBundle> bundle_of(std::size_t size, char fill) {
  return std::make_shared<const CachedBundle>(std::string(64, fill), std::string(size, fill), 0);
}

std::string key_of(int i) { return "key-" + std::to_string(i); }

}  // namespace

TEST_CASE("server::BundleCache keeps bundles within its byte capacity and evicts the least recently used first") {
  // Room for exactly three 1000-byte bundles.
  BundleCache cache(3 * (1000 + k_overhead), 1000);
  for (int i = 0; i < 3; ++i) {
    cache.insert(key_of(i), bundle_of(1000, static_cast<char>('a' + i)));
  }
  CHECK(cache.size() == 3);
  CHECK(cache.charged_bytes() == 3 * (1000 + k_overhead));
  // Using key 0 makes key 1 the least recently used: the fourth bundle evicts it.
  REQUIRE(cache.find(key_of(0)) != nullptr);
  cache.insert(key_of(3), bundle_of(1000, 'd'));
  CHECK(cache.size() == 3);
  CHECK(cache.find(key_of(1)) == nullptr);
  for (int i : {0, 2, 3}) {
    auto kept = cache.find(key_of(i));
    REQUIRE(kept != nullptr);
    CHECK(kept->bytes == std::string(1000, static_cast<char>('a' + i)));
  }
  CHECK(cache.charged_bytes() <= 3 * (1000 + k_overhead));
}

TEST_CASE("server::BundleCache replaces a key's bundle, forgets erased keys and refuses what does not fit") {
  BundleCache cache(10'000, 2'000);
  cache.insert("k", bundle_of(100, 'a'));
  cache.insert("k", bundle_of(200, 'b'));
  CHECK(cache.size() == 1);
  CHECK(cache.charged_bytes() == 200 + k_overhead);
  REQUIRE(cache.find("k") != nullptr);
  CHECK(cache.find("k")->bytes == std::string(200, 'b'));

  cache.erase("k");
  CHECK(cache.find("k") == nullptr);
  CHECK(cache.charged_bytes() == 0);
  cache.erase("never there");

  // Above the bundle limit: not kept, and an older bundle for the key is dropped.
  CHECK_FALSE(cache.admits(2'001));
  cache.insert("big", bundle_of(100, 'x'));
  cache.insert("big", bundle_of(2'001, 'y'));
  CHECK(cache.find("big") == nullptr);
  CHECK(cache.size() == 0);
  CHECK(cache.charged_bytes() == 0);
}

TEST_CASE("server::BundleCache with capacity 0 keeps nothing") {
  BundleCache cache(0, 1 << 20);
  CHECK_FALSE(cache.admits(1));
  cache.insert("k", bundle_of(10, 'a'));
  CHECK(cache.find("k") == nullptr);
  CHECK(cache.size() == 0);
}

TEST_CASE("server::BundleCache stays within its capacity under concurrent inserts and finds, and a bundle handed out outlives its eviction") {
  const std::size_t capacity = 20 * (500 + k_overhead);
  BundleCache cache(capacity, 1000);
  cache.insert("held", bundle_of(500, 'h'));
  auto held = cache.find("held");
  REQUIRE(held != nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::string key = key_of((i * 7 + t) % 100);
        if (auto kept = cache.find(key)) {
          CHECK(kept->bytes.size() == 500);
        } else {
          cache.insert(key, bundle_of(500, static_cast<char>('a' + t)));
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  CHECK(cache.charged_bytes() <= capacity);
  CHECK(cache.size() <= 20);
  // "held" was evicted long ago; the reference handed out is still whole.
  CHECK(cache.find("held") == nullptr);
  CHECK(held->bytes == std::string(500, 'h'));
}
