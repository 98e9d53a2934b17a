// One connection of the server (server/http_session.cpp) as a client on the
// wire sees it: a bundle too large to keep in memory (over 1 MiB,
// k_cached_bundle_limit) goes out on plain HTTP as its head then the object
// file by sendfile(2), and a piece at a time from the file whenever the
// socket buffer is full; a smaller one goes out from memory, as much as the
// socket takes at once by sendmsg(2) and the rest by an asynchronous write;
// every byte arrives, in order, answer after answer.
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/cli_runner.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/server.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/text.hpp"

namespace http_session_test {

// Stores one bundle of a single incompressible member of `bytes` bytes with
// `opcache put`; returns the put document (key, digest, bundle_bytes).
nlohmann::json put_incompressible(const opcache::test::CliRunner& cli, std::size_t bytes) {
  const auto desc = cli.dir() / "large.desc.json";
  opcache::test::write_text(desc, R"({"attrs": {}, "full_name": "Default/network/Fused-op1", "inputs": [],
      "kernel_name": "large_00001__kernel0", "op_type": "Fused", "outputs": []})");
  std::string member(bytes, '\0');
  std::mt19937_64 random(39);
  for (auto& c : member) {
    c = static_cast<char>(random());
  }
  const auto member_path = cli.dir() / "large.o";
  opcache::test::write_text(member_path, member);
  return cli.run_json(
      {"put", "--desc", desc.string(), "--scenario", opcache::test::k_test_scenario, member_path.string()});
}

// Sends `count` GETs of `key` at once on one connection (the last asking to
// close) through an 8 KiB receive buffer, read only after a pause so the
// server's socket fills; checks that the answers are `count` heads, each
// followed by exactly `object`.
void check_pipelined_gets(int port, const std::string& key, const std::string& digest, const std::string& object,
                          std::size_t count) {
  using namespace std::chrono_literals;
  opcache::test::RawConnection connection(port, 8 * 1024);
  std::string requests;
  for (std::size_t i = 0; i < count; ++i) {
    requests += "GET /v1/entries/" + key + " HTTP/1.1\r\nHost: 127.0.0.1" +
                (i + 1 == count ? "\r\nConnection: close" : "") + "\r\n\r\n";
  }
  REQUIRE(connection.send(requests));
  std::this_thread::sleep_for(300ms);
  CHECK(connection.wait_closed(30s));
  const std::size_t size = object.size();
  const std::string& stream = connection.received();
  std::vector<std::string> heads;
  std::size_t whole_bodies = 0;
  std::size_t at = 0;
  while (at < stream.size() && heads.size() < count) {
    const auto blank = stream.find("\r\n\r\n", at);
    REQUIRE(blank != std::string::npos);
    heads.push_back(stream.substr(at, blank + 2 - at));
    whole_bodies += stream.compare(blank + 4, size, object) == 0 ? 1 : 0;  // no megabytes printed on failure
    at = blank + 4 + size;
  }
  CHECK(heads.size() == count);
  CHECK(whole_bodies == count);
  CHECK(at == stream.size());
  for (const auto& head : heads) {
    CAPTURE(head);
    CHECK(head.rfind("HTTP/1.1 200 OK\r\n", 0) == 0);
    CHECK(opcache::test::contains(head, "\r\nContent-Length: " + std::to_string(size) + "\r\n"));
    CHECK(opcache::test::contains(head, "\r\nETag: \"" + digest + "\"\r\n"));
  }
}

}  // namespace http_session_test

TEST_CASE("server::a bundle too large to keep in memory is sent whole from its file, to a slow reader too") {
  opcache::test::TempDir dir;
  const opcache::test::CliRunner cli(dir);
  const auto put = http_session_test::put_incompressible(cli, 2600 * 1024);
  const std::string key = put["key"];
  const std::string digest = put["digest"];
  const std::size_t size = put["bundle_bytes"];
  REQUIRE(size > 2600 * 1024);
  opcache::test::ServerProcess server(cli.cache(), {"--anonymous-read", "--access-log", "off"});
  const std::string object = opcache::test::read_text(cli.cache() / "objects" / digest.substr(0, 2) / digest);
  REQUIRE(object.size() == size);
  // Four answers: the socket fills at once, so most of each waits for the reader.
  http_session_test::check_pipelined_gets(server.port(), key, digest, object, 4);
}

TEST_CASE("server::a bundle sent from memory arrives whole when the socket fills, answer after answer") {
  opcache::test::TempDir dir;
  const opcache::test::CliRunner cli(dir);
  // Under k_zero_copy_bytes (32 KiB): kept in memory without its file.
  const auto put = http_session_test::put_incompressible(cli, 28 * 1024);
  const std::string key = put["key"];
  const std::string digest = put["digest"];
  const std::size_t size = put["bundle_bytes"];
  REQUIRE(size > 28 * 1024);
  REQUIRE(size < 32 * 1024);
  opcache::test::ServerProcess server(cli.cache(), {"--anonymous-read", "--access-log", "off"});
  const std::string object = opcache::test::read_text(cli.cache() / "objects" / digest.substr(0, 2) / digest);
  REQUIRE(object.size() == size);
  // 64 answers of ~29 KiB (1.8 MiB) to a reader that waits: most answers
  // find the socket full, part sent at once and the rest later, or none.
  http_session_test::check_pipelined_gets(server.port(), key, digest, object, 64);
}
