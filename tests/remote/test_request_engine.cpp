// The request engine (remote/request_engine.hpp) against a loopback fault
// server, with injected timing: which outcomes it retries, Retry-After in
// both forms (seconds and HTTP-date, read through CURLINFO_RETRY_AFTER), the
// limit beyond which it gives up, and timeouts. Nothing sleeps.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "remote/request_engine.hpp"
#include "tests/support/fault_server.hpp"

using namespace opcache::remote;
using opcache::Status;
using namespace opcache::test;
using std::chrono::milliseconds;

namespace {

// A GET whose body is kept in memory.
class TextTransfer final : public Transfer {
 public:
  explicit TextTransfer(std::string url) : m_url(std::move(url)) {}

  Status configure(CURL* handle) override {
    curl_easy_setopt(handle, CURLOPT_URL, m_url.c_str());
    set_write_callback<&TextTransfer::on_data>(handle, *this);
    return {};
  }
  Status rewind() override {
    ++rewinds;
    body.clear();
    return {};
  }
  std::optional<opcache::Error> local_error() const override { return std::nullopt; }

  std::size_t on_data(char* data, std::size_t bytes) {
    body.append(data, bytes);
    return bytes;
  }

  std::string body;
  int rewinds = 0;

 private:
  std::string m_url;
};

// Timing that records the requested pauses instead of sleeping.
struct RecordedTiming {
  std::mutex mutex;
  std::vector<milliseconds> sleeps;

  RetryTiming timing() {
    return RetryTiming{[this](milliseconds delay) {
                         std::lock_guard lock(mutex);
                         sleeps.push_back(delay);
                       },
                       [] { return 0.0; }};
  }
};

EngineOptions options(int retries, bool retry_timeouts = true, long timeout_ms = 5000) {
  EngineOptions engine;
  engine.connect_timeout_ms = 2000;
  engine.timeout_ms = timeout_ms;
  engine.retry = RetryPolicy{retries, retry_timeouts};
  return engine;
}

// The server answers `first` to the first request and 200 "done" afterwards.
FaultServer first_then_ok(FaultReply first) {
  auto calls = std::make_shared<std::atomic<int>>(0);
  return FaultServer([calls, first](const FaultRequest&) { return ++*calls == 1 ? first : FaultReply::ok("done"); });
}

std::string http_date_in(int seconds) {
  const std::time_t when = std::time(nullptr) + seconds;
  std::tm parts{};
  ::gmtime_r(&when, &parts);
  char text[64];
  std::strftime(text, sizeof text, "%a, %d %b %Y %H:%M:%S GMT", &parts);
  return text;
}

// What one perform() did: its outcome, the pauses it asked for, what the
// transfer received and how often it was rewound.
struct Run {
  TransferOutcome outcome;
  std::vector<milliseconds> sleeps;
  std::string body;
  int rewinds = 0;
};

Run run(const std::string& url, const EngineOptions& engine_options) {
  RecordedTiming recorded;
  RequestEngine engine(engine_options, recorded.timing());
  TextTransfer transfer(url);
  auto outcome = engine.perform(transfer);
  REQUIRE_MESSAGE(outcome.ok(), outcome.error().message());
  return Run{*outcome, recorded.sleeps, transfer.body, transfer.rewinds};
}

}  // namespace

TEST_CASE("remote::RequestEngine retries a 503 after the backoff and returns the final response") {
  FaultServer server = first_then_ok(FaultReply::status(503));
  const Run result = run(server.url() + "/x", options(2));
  CHECK(result.outcome.status == 200);
  CHECK(result.outcome.attempts == 2);
  CHECK(result.body == "done");
  CHECK(result.rewinds == 1);
  CHECK(result.sleeps == std::vector<milliseconds>{backoff_delay(1, 0.0)});
}

TEST_CASE("remote::RequestEngine honours Retry-After in seconds") {
  FaultServer server = first_then_ok(FaultReply::status(429, "", "Retry-After: 3\r\n"));
  const Run result = run(server.url() + "/x", options(2));
  CHECK(result.outcome.status == 200);
  CHECK(result.sleeps == std::vector<milliseconds>{milliseconds(3000)});
}

TEST_CASE("remote::RequestEngine honours Retry-After as an HTTP date") {
  FaultServer server = first_then_ok(FaultReply::status(503, "", "Retry-After: " + http_date_in(4) + "\r\n"));
  const Run result = run(server.url() + "/x", options(2));
  CHECK(result.outcome.status == 200);
  REQUIRE(result.sleeps.size() == 1);
  // Whole seconds until the date: 4, or 3 when a second boundary passed meanwhile.
  CHECK(result.sleeps[0] >= milliseconds(2000));
  CHECK(result.sleeps[0] <= milliseconds(4000));
}

TEST_CASE("remote::RequestEngine gives up at once when Retry-After exceeds the limit") {
  FaultServer server = first_then_ok(FaultReply::status(503, "", "Retry-After: 3600\r\n"));
  const Run result = run(server.url() + "/x", options(2));
  CHECK(result.outcome.status == 503);
  CHECK(result.outcome.attempts == 1);
  CHECK(result.sleeps.empty());
  CHECK(server.connections() == 1);
}

TEST_CASE("remote::RequestEngine does not retry a 404 and stops after its retries") {
  FaultServer missing([](const FaultRequest&) { return FaultReply::status(404); });
  const Run not_found = run(missing.url() + "/x", options(2));
  CHECK(not_found.outcome.status == 404);
  CHECK(not_found.outcome.attempts == 1);

  FaultServer broken([](const FaultRequest&) { return FaultReply::status(500); });
  const Run failing = run(broken.url() + "/x", options(2));
  CHECK(failing.outcome.status == 500);
  CHECK(failing.outcome.attempts == 3);
  CHECK(failing.sleeps == std::vector<milliseconds>{backoff_delay(1, 0.0), backoff_delay(2, 0.0)});
}

TEST_CASE("remote::RequestEngine retries a refused connection and reports its CURLcode") {
  const Run result = run("http://127.0.0.1:" + std::to_string(refused_port()) + "/x", options(1));
  CHECK(result.outcome.code == CURLE_COULDNT_CONNECT);
  CHECK(result.outcome.attempts == 2);
  CHECK(result.sleeps.size() == 1);
}

TEST_CASE("remote::RequestEngine does not retry a timeout when the policy says so") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  const Run result = run(server.url() + "/x", options(2, false, 300));
  CHECK(result.outcome.code == CURLE_OPERATION_TIMEDOUT);
  CHECK(result.outcome.attempts == 1);
  CHECK(result.sleeps.empty());
  CHECK(server.connections() == 1);
}

TEST_CASE("remote::RequestEngine stops with a Transfer's local error, without retrying") {
  struct Failing final : Transfer {
    std::string url;
    Status configure(CURL* handle) override {
      curl_easy_setopt(handle, CURLOPT_URL, url.c_str());
      return {};
    }
    Status rewind() override { return {}; }
    std::optional<opcache::Error> local_error() const override { return opcache::Error::io("disk full"); }
  };
  FaultServer server([](const FaultRequest&) { return FaultReply::status(503); });
  RecordedTiming recorded;
  RequestEngine engine(options(2), recorded.timing());
  Failing transfer;
  transfer.url = server.url() + "/x";
  auto outcome = engine.perform(transfer);
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.error().message() == "disk full");
  CHECK(server.connections() == 1);
}

TEST_CASE("remote::RequestEngine::cancel aborts a request that hangs, without a retry, and every later one") {
  FaultServer server([](const FaultRequest&) { return FaultReply::hang(); });
  RecordedTiming recorded;
  RequestEngine engine(options(3, true, 60000), recorded.timing());
  TextTransfer hanging(server.url() + "/slow");
  std::thread canceller([&] {
    // Cancel once the request is on the server, not before it was sent.
    for (int i = 0; i < 500 && server.connections() == 0; ++i) {
      std::this_thread::sleep_for(milliseconds(10));
    }
    engine.cancel();
  });
  auto outcome = engine.perform(hanging);
  canceller.join();
  REQUIRE_MESSAGE(outcome.ok(), outcome.error().message());
  CHECK(outcome->code == CURLE_ABORTED_BY_CALLBACK);
  CHECK(outcome->attempts == 1);
  CHECK(recorded.sleeps.empty());
  TextTransfer later(server.url() + "/later");
  auto refused = engine.perform(later);
  REQUIRE(refused.ok());
  CHECK(refused->code == CURLE_ABORTED_BY_CALLBACK);
}
