// Replicas of `opcache serve` over one bucket end to end (docs/operations.md
// "Replicas"): three real servers over one moto_server bucket, each machine
// of a team on another replica. Covered: team single flight across replicas
// (each kernel built once in total), a lease holder killed and taken over
// through another replica, a replica killed in the middle of a run, a wait
// on one replica answered by an upload through another (the delay
// measured), a revocation through one replica refused by the others at
// once, three replicas behind a round-robin proxy, a store without
// conditional writes found out at start, and the replica settings file of
// packaging/ starting replicas.
// Skipped with the reason when moto_server is not installed.
#include <doctest/doctest.h>

#include <signal.h>

#include <chrono>
#include <future>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "opcache_test_paths.hpp"
#include "tests/support/children.hpp"
#include "tests/support/files.hpp"
#include "tests/support/flight_team.hpp"
#include "tests/support/http_proxy.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/moto.hpp"
#include "tests/support/process.hpp"
#include "tests/support/server.hpp"
#include "tests/support/single_flight.hpp"
#include "tests/support/skip.hpp"
#include "tests/support/tokens.hpp"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace opcache::test;
using namespace std::chrono_literals;

namespace replicas_test {

// The s3:// storage of one test: its own prefix in a shared moto bucket.
std::string replica_storage(const std::string& prefix) {
  return "s3://opcache-replicas/" + prefix + "?endpoint=" + MotoServer::shared().endpoint();
}

// Starts `count` replicas named replica-0… over `storage`.
void start_replicas(FlightTeam& team, const std::string& storage, int count, std::vector<std::string> args = {}) {
  for (int i = 0; i < count; ++i) {
    auto replica_args = args;
    replica_args.insert(replica_args.end(), {"--replica", "replica-" + std::to_string(i)});
    team.start_server(storage, replica_args);
  }
}

// The cache key of kernel `index` (as exec keys it: on its descriptor).
std::string kernel_key(const FlightTeam& team, int index) {
  auto key = run_cli({"--cache-dir", team.cache(0).string(), "key", "--desc",
                      team.descs[static_cast<std::size_t>(index)].string(), "--scenario", k_test_scenario});
  REQUIRE_MESSAGE(key.exit_code == 0, key.err);
  return key.out.substr(0, key.out.find('\n'));
}

HttpResponse get_entry(const ServerProcess& server, const std::string& key, const std::string& query = "") {
  return http_request("GET", server.base_url() + "/v1/entries/" + key + query,
                      {std::string("Authorization: Bearer ") + k_write_token});
}

// The environment every test starts with: no developer settings, moto's
// credentials for the servers and clients.
bool ready_for_moto() {
  hermetic_environment();
  if (MotoServer::unavailable_reason()) {
    report_skip(*MotoServer::unavailable_reason());
    return false;
  }
  use_moto_test_credentials();
  return true;
}

}  // namespace replicas_test

using namespace replicas_test;

TEST_CASE("e2e::replicas: 16 processes on 4 machines, each machine on another of 3 replicas, build each kernel once") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(12);
  start_replicas(team, replica_storage("flight"), 3);
  for (const auto& server : team.servers) {
    CHECK(team.status(*server)["leases"]["kind"] == "bucket");
    CHECK(server->log_text().find("build leases: in the bucket") != std::string::npos);
  }
  const auto wall_ms = run_flight(team, 4, 4, 0.3, [&](int machine) { return team.remote_args(machine); });
  MESSAGE("16 processes x 12 kernels (0.3 s builds) through 3 replicas over one bucket: " << wall_ms << " ms");

  const auto builds = team.builds();
  CHECK(builds.size() == 12);
  for (const auto& [kernel, count] : builds) {
    CHECK_MESSAGE(count == 1, "kernel " << kernel << " was built " << count << " times");
  }
  for (const auto& [kernel, contents] : flight_outputs(team)) {
    CHECK_MESSAGE(contents.size() == 1, "kernel " << kernel << " has " << contents.size() << " different outputs");
  }
  std::int64_t granted = 0, refused = 0;
  for (const auto& server : team.servers) {
    const auto status = team.status(*server);
    granted += status["leases"]["granted"].get<std::int64_t>();
    refused += status["leases"]["refused"].get<std::int64_t>();
  }
  MESSAGE("leases granted " << granted << ", refused " << refused << " across the replicas");
  CHECK(granted == 12);
  std::int64_t team_builds = 0;
  for (int m = 0; m < 4; ++m) {
    team_builds += stats_counter(team.stats(m), "team_builds");
  }
  CHECK(team_builds == 12);
}

TEST_CASE("e2e::replicas: a lease holder killed mid-build is taken over through another replica after the TTL") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(1);
  start_replicas(team, replica_storage("takeover"), 2, {"--lease-ttl", "2"});
  ChildGuard guard;
  const pid_t holder = start_flight_holder(team, guard, 120);  // machine 0: replica 0
  const pid_t waiter = spawn_background(guard, team.exec(1, 0, team.dir / "out-b", 0.1));  // machine 1: replica 1
  wait_until(
      [&] {
        auto status = team.status(*team.servers[1]);
        return status["leases"]["waiting"] == 1 || status["leases"]["refused"].get<int>() >= 1;
      },
      60s, "the second machine to find the lease held through the other replica");
  guard.kill(holder);  // SIGKILL, mid-build
  CHECK(guard.wait(waiter) == 0);
  CHECK(team.builds()["0"] == 2);  // the killed build and the takeover
  CHECK(read_text(team.dir / "out-b" / "kernel.o").find("kernel 0 built by") == 0);
  CHECK(stats_counter(team.stats(1), "team_takeovers") == 1);
  CHECK(team.status(*team.servers[1])["leases"]["expired"] == 1);
}

TEST_CASE("e2e::replicas: a replica killed in the middle of a run leaves every process finishing with its kernels") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(10);
  // The machine on the killed replica can no longer renew or release the
  // leases it took: the others wait for those to expire (a balancer would
  // send its renewals to a live replica; here each machine has its own).
  start_replicas(team, replica_storage("killed"), 3, {"--lease-ttl", "4"});
  const auto wall_ms = run_flight(
      team, 3, 2, 0.3, [&](int machine) { return team.remote_args(machine, "|timeout=2000|connect-timeout=500"); },
      [&] {
        wait_until([&] { return team.builds().size() >= 3; }, 60s, "the first builds");
        team.servers[2]->signal(SIGKILL);
      });
  MESSAGE("6 processes x 10 kernels on 3 replicas, one killed after 3 builds: " << wall_ms << " ms");
  const auto by_kernel = flight_outputs(team);
  CHECK(by_kernel.size() == 10);
  for (const auto& [kernel, contents] : by_kernel) {
    for (const auto& content : contents) {
      CHECK(content.find("kernel " + std::to_string(kernel) + " built by") == 0);
    }
  }
  // The replicas left standing still agree on one build per kernel built through them.
  for (int machine : {0, 1}) {
    auto again = run_process(team.exec(machine, 5, team.dir / ("again-" + std::to_string(machine)), 0.1));
    CHECK_MESSAGE(again.exit_code == 0, again.err);
    CHECK(json_source(again.out) == "hit");
  }
}

TEST_CASE("e2e::replicas: a wait on one replica is answered by an upload through another within its poll") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(1);
  start_replicas(team, replica_storage("wait"), 2);
  const auto key = kernel_key(team, 0);
  auto waiting = std::async(std::launch::async, [&] {
    auto response = get_entry(*team.servers[1], key, "?wait=60");
    return std::make_pair(response.status, Clock::now());
  });
  wait_until([&] { return team.status(*team.servers[1])["leases"]["waiting"] == 1; }, 30s,
             "the wait to be held by replica 1");
  auto upload = run_process(team.exec(0, 0, team.dir / "out-a", 0.1));  // through replica 0
  const auto uploaded = Clock::now();
  REQUIRE_MESSAGE(upload.exit_code == 0, upload.err);
  const auto [status, answered] = waiting.get();
  CHECK(status == 200);
  const auto delay_ms = std::chrono::duration_cast<std::chrono::milliseconds>(answered - uploaded).count();
  MESSAGE("a wait on replica 1 answered " << delay_ms << " ms after the upload through replica 0 ended");
  CHECK(delay_ms < 30000);  // catches a wait that only the deadline ends; the poll is 1 s
}

TEST_CASE("e2e::replicas: a revocation through one replica is refused by the others at once") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(1);
  write_text(team.dir / "tokens", token_line(k_write_token, "team", "read,write,admin"));
  start_replicas(team, replica_storage("revoke"), 3);
  auto built = run_process(team.exec(0, 0, team.dir / "out-a", 0.1));
  REQUIRE_MESSAGE(built.exit_code == 0, built.err);
  auto copied = run_process(team.exec(1, 0, team.dir / "out-b", 0.1));  // machine 1's copy, through replica 1
  REQUIRE_MESSAGE(copied.exit_code == 0, copied.err);
  CHECK(json_source(copied.out) == "hit");
  const auto key = kernel_key(team, 0);
  for (const auto& server : team.servers) {
    CHECK(get_entry(*server, key).status == 200);
  }
  auto revoked = http_request("POST", team.servers[0]->base_url() + "/v1/revocations",
                              {std::string("Authorization: Bearer ") + k_write_token, "Content-Type: application/json"},
                              json{{"keys", {key}}, {"reason", "wrong tiling on 910B"}}.dump());
  REQUIRE_MESSAGE(revoked.status == 200, revoked.body);
  for (const auto& server : team.servers) {
    auto refused = get_entry(*server, key);
    CHECK(refused.status == 410);
    CHECK(refused.body.find("wrong tiling on 910B") != std::string::npos);
  }
  // The machine that has a copy, checking revocations on every use, rebuilds instead of using it.
  auto again = run_process(
      team.exec(1, 0, team.dir / "out-c", 0.1,
                [&] {
                  auto args = team.remote_args(1);
                  args.insert(args.end(), {"--revocation-check-interval", "0"});
                  return args;
                }()));
  CHECK_MESSAGE(again.exit_code == 0, again.err);
  CHECK(team.builds()["0"] == 2);
}

TEST_CASE("e2e::replicas: packaging/replicas/serve-replica.ini starts replicas that share their leases") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(1);
  const fs::path ini = fs::path(OPCACHE_SOURCE_DIR) / "packaging" / "replicas" / "serve-replica.ini";
  // The file as shipped, but for what only a real host has: the bucket, the
  // tokens file, the port and the name (flags beat the file).
  for (int i = 0; i < 2; ++i) {
    team.servers.push_back(std::make_unique<ServerProcess>(
        replica_storage("packaged"),
        std::vector<std::string>{"--tokens", (team.dir / "tokens").string(), "--replica", "host-" + std::to_string(i)},
        10s, std::vector<std::string>{"--config", ini.string()}));
  }
  CHECK(team.status(*team.servers[0])["leases"]["kind"] == "bucket");
  const auto key = kernel_key(team, 0);
  auto lease = http_request("POST", team.servers[0]->base_url() + "/v1/leases/" + key,
                            {std::string("Authorization: Bearer ") + k_write_token});
  CHECK(lease.status == 201);
  auto held = http_request("POST", team.servers[1]->base_url() + "/v1/leases/" + key,
                           {std::string("Authorization: Bearer ") + k_write_token});
  CHECK(held.status == 409);
}

TEST_CASE("e2e::replicas: behind a round-robin proxy, each request to the next replica, each kernel is built once") {
  if (!ready_for_moto()) {
    return;
  }
  FlightTeam team(8);
  start_replicas(team, replica_storage("round-robin"), 3);
  ProxyOptions options;
  for (const auto& server : team.servers) {
    options.backends.push_back(server->base_url());
  }
  HttpProxy balancer(options);
  team.front_url = balancer.url();
  const auto wall_ms = run_flight(team, 4, 2, 0.3, [&](int machine) { return team.remote_args(machine); });
  MESSAGE("8 processes x 8 kernels (0.3 s builds) through a round-robin proxy over 3 replicas: " << wall_ms << " ms");
  for (const auto& [kernel, count] : team.builds()) {
    CHECK_MESSAGE(count == 1, "kernel " << kernel << " was built " << count << " times");
  }
  for (const auto& [kernel, contents] : flight_outputs(team)) {
    CHECK(contents.size() == 1);
  }
  // Every replica answered lease and entry requests: the leases are the bucket's, not one replica's.
  std::set<std::size_t> lease_backends;
  for (const auto& request : balancer.requests()) {
    if (request.target.rfind("/v1/leases/", 0) == 0) {
      lease_backends.insert(request.backend);
    }
  }
  CHECK(lease_backends.size() == 3);
}

TEST_CASE("e2e::replicas: a store that ignores or refuses conditional writes is found out at start, and leases stay in memory") {
  if (!ready_for_moto()) {
    return;
  }
  struct Bent {
    const char* what;
    ProxyOptions options;
  };
  ProxyOptions stripping{{MotoServer::shared().endpoint()}, {"If-None-Match", "If-Match"}, {}};
  ProxyOptions refusing{{MotoServer::shared().endpoint()}, {}, {ProxyRule{"PUT", "", "if-none-match", 501}}};
  for (const auto& bent : {Bent{"a proxy stripping If-None-Match and If-Match", stripping},
                           Bent{"a store answering 501 to conditional writes", refusing}}) {
    CAPTURE(bent.what);
    HttpProxy bucket(bent.options);
    FlightTeam team(1);
    team.start_server("s3://opcache-replicas/bent?endpoint=" + bucket.url());
    CHECK(team.status(team.server())["leases"]["kind"] == "memory");
    const auto log = team.server().log_text();
    CHECK(log.find("build leases: in this replica's memory, because the bucket does not honour conditional writes") !=
          std::string::npos);
    // It still serves: a lease is granted (by this replica alone).
    const auto key = kernel_key(team, 0);
    CHECK(http_request("POST", team.server().base_url() + "/v1/leases/" + key,
                       {std::string("Authorization: Bearer ") + k_write_token})
              .status == 201);
  }
}
