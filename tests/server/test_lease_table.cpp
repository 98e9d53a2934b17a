// Build leases in memory (server/lease_table): grant, refuse, renew, release,
// expiry judged against an injected clock, and the counts.
#include <doctest/doctest.h>

#include <chrono>

#include "server/lease_table.hpp"

using opcache::server::LeaseTable;
using namespace std::chrono_literals;

namespace {

const std::string k_leased_key(64, 'b');

// A clock the test moves by hand.
struct ManualClock {
  LeaseTable::Clock::time_point now = LeaseTable::Clock::time_point(1000s);
  auto function() {
    return [this] { return now; };
  }
};

}  // namespace

TEST_CASE("server::LeaseTable grants one lease per key, refuses others with the holder, and counts both") {
  ManualClock clock;
  LeaseTable table(clock.function());
  auto first = table.acquire(k_leased_key, "host-a:1", "", 60s);
  REQUIRE(first.granted);
  CHECK(first.lease.id.size() == 32);
  CHECK(first.lease.holder == "host-a:1");
  clock.now += 5s;
  auto second = table.acquire(k_leased_key, "host-b:2", "", 60s);
  CHECK_FALSE(second.granted);
  CHECK(second.lease.holder == "host-a:1");
  CHECK(second.lease.id == first.lease.id);
  CHECK(table.acquire(std::string(64, 'c'), "host-b:2", "", 60s).granted);  // another key is free
  auto counts = table.counts();
  CHECK(counts.granted == 2);
  CHECK(counts.refused == 1);
  CHECK(counts.active == 2);
}

TEST_CASE("server::LeaseTable lets a lease expire unless renewed, then grants it to the next asker") {
  ManualClock clock;
  LeaseTable table(clock.function());
  auto first = table.acquire(k_leased_key, "a", "", 10s);
  REQUIRE(first.granted);
  clock.now += 8s;
  REQUIRE(table.renew(k_leased_key, first.lease.id, 10s));  // now expires at +18 s
  clock.now += 8s;
  CHECK(table.live(k_leased_key));
  CHECK_FALSE(table.acquire(k_leased_key, "b", "", 10s).granted);
  clock.now += 3s;  // +19 s: expired
  CHECK_FALSE(table.live(k_leased_key));
  auto takeover = table.acquire(k_leased_key, "b", "", 10s);
  REQUIRE(takeover.granted);
  CHECK(takeover.lease.id != first.lease.id);
  // The first holder's id is worthless now.
  CHECK_FALSE(table.renew(k_leased_key, first.lease.id, 10s));
  CHECK_FALSE(table.release(k_leased_key, first.lease.id));
  CHECK(table.live(k_leased_key)->holder == "b");
  CHECK(table.counts().expired == 1);
}

TEST_CASE("server::LeaseTable releases by id or by key, and counts releases and expiries once") {
  ManualClock clock;
  LeaseTable table(clock.function());
  auto lease = table.acquire(k_leased_key, "a", "", 10s);
  CHECK_FALSE(table.release(k_leased_key, "0000"));
  CHECK(table.release(k_leased_key, lease.lease.id));
  CHECK_FALSE(table.release(k_leased_key, lease.lease.id));
  CHECK_FALSE(table.release_key(k_leased_key));
  REQUIRE(table.acquire(k_leased_key, "b", "", 10s).granted);
  CHECK(table.release_key(k_leased_key));  // its entry was uploaded
  REQUIRE(table.acquire(k_leased_key, "c", "", 1s).granted);
  clock.now += 2s;
  auto counts = table.counts();
  CHECK(counts.released == 2);
  CHECK(counts.expired == 1);
  CHECK(counts.active == 0);
  CHECK(table.counts().expired == 1);
  auto unneeded = table.acquire(k_leased_key, "d", "", 10s);
  CHECK(table.withdraw(k_leased_key, unneeded.lease.id));
  CHECK(table.counts().granted == 3);
  CHECK(table.counts().released == 2);
}

TEST_CASE("server::LeaseTable gives a retried request its own lease back, and refuses the same holder's other "
          "requests") {
  ManualClock clock;
  LeaseTable table(clock.function());
  const std::string request(32, '7');
  auto first = table.acquire(k_leased_key, "host-a:1", request, 10s);
  REQUIRE(first.granted);
  clock.now += 8s;
  auto retry = table.acquire(k_leased_key, "host-a:1", request, 10s);  // the 201 was lost: the client asks again
  REQUIRE(retry.granted);
  CHECK(retry.lease.id == first.lease.id);
  CHECK(retry.lease.expires == clock.now + 10s);  // extended as a grant would be
  // Another process on a host of the same name (containers on the host
  // network) sends another request id: refused, although the holder is equal.
  CHECK_FALSE(table.acquire(k_leased_key, "host-a:1", std::string(32, '8'), 10s).granted);
  CHECK_FALSE(table.acquire(k_leased_key, "host-a:1", "", 10s).granted);  // no request id: never a retry
  auto counts = table.counts();
  CHECK(counts.granted == 1);
  CHECK(counts.refused == 2);
  CHECK(table.release(k_leased_key, first.lease.id));
  CHECK(table.acquire(k_leased_key, "host-b:2", request, 10s).granted);  // a released lease is not held by anyone
  CHECK(table.counts().granted == 2);
}
