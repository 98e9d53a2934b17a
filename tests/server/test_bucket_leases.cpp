// Build leases in a bucket (server/bucket_leases) against a real moto_server:
// one live lease per key across books that share the bucket (two replicas),
// takeover after expiry, renew/release by id only, the idempotent retry,
// and the start-up probe that finds a store without conditional writes.
// Skipped with the reason when moto_server is not installed.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "base/environment.hpp"
#include "remote/s3/client.hpp"
#include "remote/s3/credentials.hpp"
#include "remote/s3/url.hpp"
#include "server/bucket_leases.hpp"
#include "server/s3_storage.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/skip.hpp"

using namespace opcache::test;
using namespace std::chrono_literals;
using opcache::server::LeaseBook;

namespace bucket_leases_test {

const std::string k_key(64, 'e');

// A wall clock the test moves by hand, shared by the books of one test.
struct WallClock {
  std::chrono::system_clock::time_point now = std::chrono::system_clock::now();
  auto function() {
    return [this] { return now; };
  }
};

opcache::remote::S3Client moto_client(const std::string& bucket, const std::string& prefix) {
  use_moto_test_credentials();
  auto location =
      opcache::remote::parse_s3_url("s3://" + bucket + "/" + prefix + "?endpoint=" + MotoServer::shared().endpoint());
  REQUIRE(location.ok());
  auto credentials = opcache::remote::load_s3_credentials(opcache::base::process_environment());
  REQUIRE(credentials.ok());
  opcache::remote::S3Client client(*location, *credentials);
  REQUIRE(client.create_bucket_if_missing().ok());
  return client;
}

// The answer of a call that must reach the bucket.
template <typename T>
T sure(opcache::Result<T> result) {
  REQUIRE_MESSAGE(result.ok(), result.error().message());
  return std::move(*result);
}

}  // namespace bucket_leases_test

using namespace bucket_leases_test;

TEST_CASE("server::bucket leases: two replicas over one bucket grant one lease per key and refuse with the holder") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = moto_client("opcache-leases", "one");
  WallClock clock;
  auto replica_a = opcache::server::make_bucket_lease_book(client, clock.function());
  auto replica_b = opcache::server::make_bucket_lease_book(client, clock.function());
  CHECK(replica_a->kind() == "bucket");
  auto first = sure(replica_a->acquire(k_key, "host-a:1", "", 60s));
  REQUIRE(first.granted);
  CHECK(first.lease.id.size() == 32);
  auto second = sure(replica_b->acquire(k_key, "host-b:2", "", 60s));
  CHECK_FALSE(second.granted);
  CHECK(second.lease.holder == "host-a:1");
  CHECK(second.lease.id == first.lease.id);
  // The other replica sees the live lease too (a wait there ends when it does).
  auto seen = sure(replica_b->live(k_key));
  REQUIRE(seen.has_value());
  CHECK(seen->id == first.lease.id);
  CHECK(replica_a->counts().granted == 1);
  CHECK(replica_a->counts().active == 1);
  CHECK(replica_b->counts().refused == 1);
  CHECK(replica_b->counts().granted == 0);
}

TEST_CASE("server::bucket leases: an expired lease is taken over through another replica, and its old id is worthless") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = moto_client("opcache-leases", "expiry");
  WallClock clock;
  auto replica_a = opcache::server::make_bucket_lease_book(client, clock.function());
  auto replica_b = opcache::server::make_bucket_lease_book(client, clock.function());
  auto first = sure(replica_a->acquire(k_key, "a", "", 10s));
  REQUIRE(first.granted);
  clock.now += 8s;
  REQUIRE(sure(replica_b->renew(k_key, first.lease.id, 10s)).has_value());  // renewed through the other replica
  clock.now += 8s;
  CHECK_FALSE(sure(replica_b->acquire(k_key, "b", "", 10s)).granted);
  clock.now += 3s;  // +19 s: expired
  CHECK_FALSE(sure(replica_a->live(k_key)).has_value());
  auto takeover = sure(replica_b->acquire(k_key, "b", "", 10s));
  REQUIRE(takeover.granted);
  CHECK(takeover.lease.id != first.lease.id);
  CHECK(replica_b->counts().expired == 1);
  CHECK_FALSE(sure(replica_a->renew(k_key, first.lease.id, 10s)).has_value());
  CHECK_FALSE(sure(replica_a->release(k_key, first.lease.id)));
  CHECK(sure(replica_a->live(k_key))->holder == "b");
}

TEST_CASE("server::bucket leases: a retried request gets its lease back, release frees the key for the next asker") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = moto_client("opcache-leases", "retry");
  WallClock clock;
  auto replica_a = opcache::server::make_bucket_lease_book(client, clock.function());
  auto replica_b = opcache::server::make_bucket_lease_book(client, clock.function());
  const std::string request = "req-0123456789abcdef";
  auto first = sure(replica_a->acquire(k_key, "a", request, 10s));
  REQUIRE(first.granted);
  clock.now += 5s;
  auto retried = sure(replica_b->acquire(k_key, "a", request, 10s));  // its 201 was lost; it asked another replica
  REQUIRE(retried.granted);
  CHECK(retried.lease.id == first.lease.id);
  CHECK_FALSE(sure(replica_b->release(k_key, std::string(32, '0'))));
  CHECK(sure(replica_b->release(k_key, first.lease.id)));
  CHECK_FALSE(sure(replica_a->release(k_key, first.lease.id)));  // once only
  CHECK_FALSE(sure(replica_a->live(k_key)).has_value());
  CHECK(replica_b->counts().released == 1);
  auto next = sure(replica_a->acquire(k_key, "c", "", 10s));
  CHECK(next.granted);
  CHECK(replica_a->counts().expired == 0);  // a released lease is not an expired one
  // The upload ends whatever lease the key has.
  REQUIRE(replica_b->release_key(k_key).ok());
  CHECK_FALSE(sure(replica_a->live(k_key)).has_value());
  CHECK(sure(replica_b->acquire(k_key, "d", "", 10s)).granted);
}

TEST_CASE("server::bucket leases: of 8 threads on 4 replicas asking at once, exactly one is granted") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = moto_client("opcache-leases", "race");
  std::vector<std::unique_ptr<LeaseBook>> replicas;
  for (int i = 0; i < 4; ++i) {
    replicas.push_back(opcache::server::make_bucket_lease_book(client, std::chrono::system_clock::now));
  }
  for (int round = 0; round < 3; ++round) {
    const std::string key = std::string(63, 'a') + static_cast<char>('0' + round);
    std::vector<std::thread> threads;
    std::vector<int> granted(8, -1);
    for (int i = 0; i < 8; ++i) {
      threads.emplace_back([&, i] {
        auto answer = replicas[static_cast<std::size_t>(i % 4)]->acquire(key, "t" + std::to_string(i), "", 60s);
        granted[static_cast<std::size_t>(i)] = answer.ok() ? (answer->granted ? 1 : 0) : 2;
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    CAPTURE(round);
    CHECK(std::count(granted.begin(), granted.end(), 1) == 1);
    CHECK(std::count(granted.begin(), granted.end(), 0) == 7);
  }
}

TEST_CASE("server::bucket leases: the start-up probe chooses the bucket's book over moto, and leaves nothing behind") {
  OPCACHE_SKIP_IF(MotoServer::unavailable_reason().has_value(), *MotoServer::unavailable_reason());
  auto client = moto_client("opcache-leases", "probe");
  auto storage = opcache::server::make_s3_storage(
      "s3://opcache-leases/probe?endpoint=" + MotoServer::shared().endpoint(), opcache::base::process_environment(),
      {}, 1 << 20);
  REQUIRE(storage.ok());
  std::string note;
  auto book = opcache::server::open_lease_book(**storage, &note);
  CHECK(book->kind() == "bucket");
  CHECK_FALSE(book->is_local());
  CHECK(note == "build leases: in the bucket, shared by every replica over it");
  auto listed = client.list("v1/leases/", "", "", 100);
  REQUIRE(listed.ok());
  CHECK(listed->objects.empty());
}
