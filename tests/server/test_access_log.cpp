// The server's access log (server/access_log.hpp): lines wait in memory and
// are written together — when the oldest has waited the flush interval, when
// a batch's worth waits, before an event, on flush() and at destruction — in
// the order they came, each whole; a zero interval writes each line at once.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "server/access_log.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using opcache::server::AccessLog;
using opcache::server::AccessRecord;
using opcache::server::LogFormat;
using opcache::test::read_text;
using opcache::test::TempDir;

AccessRecord access_record_for(const std::string& target) {
  AccessRecord record;
  record.client = "127.0.0.1:5";
  record.method = "GET";
  record.target = target;
  record.status = 200;
  record.bytes_out = 7;
  return record;
}

std::vector<std::string> access_log_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    lines.push_back(line);
  }
  return lines;
}

AccessLog open_access_log(const std::filesystem::path& path, std::chrono::milliseconds interval) {
  auto log = AccessLog::open(path, LogFormat::text, interval);
  REQUIRE(log);
  return std::move(*log);
}

}  // namespace

TEST_CASE("server::AccessLog keeps request lines until flush(), an event or its end, then writes them in order") {
  TempDir dir;
  const auto path = dir / "access.log";
  {
    AccessLog log = open_access_log(path, std::chrono::hours(1));
    log.write(access_record_for("/v1/entries/a"));
    log.write(access_record_for("/v1/entries/b"));
    CHECK(read_text(path).empty());  // an hour has not passed, and 2 lines are no batch

    log.flush();
    auto lines = access_log_lines(read_text(path));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find(" GET /v1/entries/a 200 in=0 out=7 ") != std::string::npos);
    CHECK(lines[1].find(" GET /v1/entries/b 200 ") != std::string::npos);

    log.write(access_record_for("/v1/entries/c"));
    log.event("reloaded 1 tokens");  // written at once, after the line that waited
    lines = access_log_lines(read_text(path));
    REQUIRE(lines.size() == 4);
    CHECK(lines[2].find("/v1/entries/c") != std::string::npos);
    CHECK(lines[3].find("opcache serve: reloaded 1 tokens") != std::string::npos);

    log.write(access_record_for("/v1/entries/d"));
    CHECK(access_log_lines(read_text(path)).size() == 4);
  }
  const auto lines = access_log_lines(read_text(path));  // the destructor wrote the last one
  REQUIRE(lines.size() == 5);
  CHECK(lines[4].find("/v1/entries/d") != std::string::npos);
}

TEST_CASE("server::AccessLog writes the waiting lines once a batch's worth waits, or the oldest has waited the interval") {
  TempDir dir;
  SUBCASE("a batch's worth") {
    const auto path = dir / "batch.log";
    AccessLog log = open_access_log(path, std::chrono::hours(1));
    const std::string target = "/v1/entries/" + std::string(200, 'k');
    std::size_t written = 0;
    while (read_text(path).empty()) {
      log.write(access_record_for(target));
      ++written;
      REQUIRE(written * target.size() < 2 * AccessLog::k_batch_bytes);
    }
    // Every line written so far came out whole, in one batch of at least k_batch_bytes.
    const std::string text = read_text(path);
    CHECK(text.size() >= AccessLog::k_batch_bytes);
    CHECK(access_log_lines(text).size() == written);
    CHECK(text.back() == '\n');
  }
  SUBCASE("the interval") {
    const auto path = dir / "interval.log";
    AccessLog log = open_access_log(path, std::chrono::milliseconds(50));
    log.write(access_record_for("/v1/entries/first"));
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    log.write(access_record_for("/v1/entries/second"));  // the first has waited longer than 50 ms
    const auto lines = access_log_lines(read_text(path));
    REQUIRE(lines.size() == 2);
    CHECK(lines[0].find("/first") != std::string::npos);
  }
  SUBCASE("a zero interval writes each line at once") {
    const auto path = dir / "unbuffered.log";
    AccessLog log = open_access_log(path, std::chrono::milliseconds(0));
    log.write(access_record_for("/v1/entries/x"));
    CHECK(access_log_lines(read_text(path)).size() == 1);
  }
}

TEST_CASE("server::AccessLog lines from many threads come out whole, none lost") {
  TempDir dir;
  const auto path = dir / "threads.log";
  constexpr int k_threads = 4;
  constexpr int k_lines = 2000;
  {
    AccessLog log = open_access_log(path, std::chrono::hours(1));
    std::vector<std::thread> threads;
    for (int t = 0; t < k_threads; ++t) {
      threads.emplace_back([&log, t] {
        for (int i = 0; i < k_lines; ++i) {
          log.write(access_record_for("/v1/entries/t" + std::to_string(t) + "-" + std::to_string(i)));
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
  }
  const auto lines = access_log_lines(read_text(path));
  REQUIRE(lines.size() == static_cast<std::size_t>(k_threads * k_lines));
  // Each thread's lines keep their order, and every line is whole.
  std::vector<int> next(k_threads, 0);
  for (const auto& line : lines) {
    const auto at = line.find(" GET /v1/entries/t");
    REQUIRE(at != std::string::npos);
    REQUIRE(line.find(" token=-") != std::string::npos);
    const int thread = line[at + 18] - '0';
    const auto dash = line.find('-', at + 18);
    const int index = std::stoi(line.substr(dash + 1));
    REQUIRE(thread >= 0);
    REQUIRE(thread < k_threads);
    CHECK(index == next[static_cast<std::size_t>(thread)]);
    next[static_cast<std::size_t>(thread)] = index + 1;
  }
  CHECK(std::all_of(next.begin(), next.end(), [](int n) { return n == k_lines; }));
}

TEST_CASE("server::AccessLog prints a request's duration in milliseconds with three decimals, rounded") {
  TempDir dir;
  const auto path = dir / "duration.log";
  const std::vector<std::pair<double, std::string>> cases = {
      {0.0, " 0.000ms "}, {0.0123456, " 12.346ms "}, {0.0000004, " 0.000ms "},
      {1.5, " 1500.000ms "}, {123.0009994, " 123000.999ms "}};
  {
    AccessLog log = open_access_log(path, std::chrono::hours(1));
    const std::string target = "/v1/entries/d";  // the record holds a view of it
    for (const auto& [seconds, printed] : cases) {
      auto record = access_record_for(target);
      record.seconds = seconds;
      log.write(record);
    }
  }
  const auto lines = access_log_lines(read_text(path));
  REQUIRE(lines.size() == cases.size());
  for (std::size_t i = 0; i < cases.size(); ++i) {
    CAPTURE(lines[i]);
    CHECK(lines[i].find(cases[i].second) != std::string::npos);
  }
}

TEST_CASE("server::AccessLog writes a line at its longest whole: every field at its widest, the batch around it intact") {
  // The text line is formatted into room made for its longest form (20-digit
  // byte counts, a long target and token): nothing may be cut or left over.
  TempDir dir;
  const auto path = dir / "longest.log";
  const std::string target = "/v1/entries/" + std::string(4000, 'f') + "?wait=30";
  const std::string token = std::string(200, 't');
  {
    AccessLog log = open_access_log(path, std::chrono::hours(1));
    log.write(access_record_for("/v1/entries/before"));
    auto record = access_record_for(target);
    record.client = "[2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535";
    record.method = "OPTIONS";
    record.status = 599;
    record.bytes_in = 18446744073709551615u;
    record.bytes_out = 18446744073709551615u;
    record.seconds = 1e9;
    record.token_name = token;
    log.write(record);
    log.write(access_record_for("/v1/entries/after"));
  }
  const auto lines = access_log_lines(read_text(path));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].find(" GET /v1/entries/before 200 in=0 out=7 0.000ms token=-") != std::string::npos);
  CHECK(lines[1].substr(lines[1].find(' ')) == " [2001:db8:ffff:ffff:ffff:ffff:ffff:ffff]:65535 OPTIONS " + target +
                                                   " 599 in=18446744073709551615 out=18446744073709551615 "
                                                   "1000000000000.000ms token=" +
                                                   token);
  CHECK(lines[2].find(" GET /v1/entries/after 200 in=0 out=7 0.000ms token=-") != std::string::npos);
}
