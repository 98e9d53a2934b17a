// The recording proxy of tests/support/http_proxy.hpp against fault servers
// as backends: what it records, forwards, strips, answers itself, and how it
// spreads requests over backends.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tests/support/fault_server.hpp"
#include "tests/support/http_proxy.hpp"
#include "tests/support/server.hpp"

using opcache::test::FaultReply;
using opcache::test::FaultRequest;
using opcache::test::FaultServer;
using opcache::test::HttpClient;
using opcache::test::HttpProxy;
using opcache::test::ProxiedRequest;
using opcache::test::ProxyOptions;
using opcache::test::ProxyRule;

namespace http_proxy_test {

// A backend answering 200 "<name> <target>".
FaultServer named_backend(const std::string& name) {
  return FaultServer([name](const FaultRequest& request) { return FaultReply::ok(name + " " + request.target); });
}

}  // namespace http_proxy_test

TEST_CASE("support::HttpProxy forwards a request and its body, records its headers and strips the named ones") {
  FaultServer backend([](const FaultRequest& request) {
    return FaultReply::ok("got " + std::to_string(request.body.size()) + " bytes for " + request.target);
  });
  HttpProxy proxy(ProxyOptions{{backend.url()}, {"Authorization"}, {}});

  auto answer = opcache::test::http_request("GET", proxy.url() + "/bucket/key?X-Amz-Expires=300",
                                            {"Authorization: Bearer secret", "X-Kept: yes"});
  CHECK(answer.status == 200);
  CHECK(answer.body == "got 0 bytes for /bucket/key?X-Amz-Expires=300");
  const std::string body(3 << 20, 'b');  // large enough for libcurl's Expect: 100-continue
  auto put = opcache::test::http_request("PUT", proxy.url() + "/bucket/big", {}, body);
  CHECK(put.body == "got " + std::to_string(body.size()) + " bytes for /bucket/big");

  const auto seen = proxy.requests();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].method == "GET");
  CHECK(seen[0].target == "/bucket/key?X-Amz-Expires=300");
  CHECK(seen[0].header("authorization") == "Bearer secret");  // recorded as the client sent it
  CHECK(seen[0].backend == 0);
  CHECK(seen[0].status == 200);
  CHECK(seen[1].method == "PUT");
  const auto forwarded = backend.requests();
  REQUIRE(forwarded.size() == 2);
  CHECK(forwarded[0].header("authorization").empty());  // stripped on the way
  CHECK(forwarded[0].header("x-kept") == "yes");
  CHECK(forwarded[1].body == body);
  proxy.clear_requests();
  CHECK(proxy.requests().empty());
}

TEST_CASE("support::HttpProxy sends requests to its backends in turn and skips one that refuses connections") {
  FaultServer first = http_proxy_test::named_backend("first");
  FaultServer second = http_proxy_test::named_backend("second");
  const std::string refusing = "http://127.0.0.1:" + std::to_string(opcache::test::refused_port());
  HttpProxy proxy(ProxyOptions{{first.url(), second.url(), refusing}, {}, {}});

  // One kept-alive client connection: the proxy still spreads its requests.
  HttpClient client;
  std::vector<std::string> answered;
  for (int i = 0; i < 6; ++i) {
    auto answer = client.request("GET", proxy.url() + "/r" + std::to_string(i));
    REQUIRE(answer.status == 200);
    answered.push_back(answer.body.substr(0, answer.body.find(' ')));
  }
  // Backend 2 refuses: its turns go to the next one, backend 0.
  CHECK(answered == std::vector<std::string>{"first", "second", "first", "first", "second", "first"});
  for (const ProxiedRequest& request : proxy.requests()) {
    CHECK(request.backend < 2);
  }
  CHECK(first.requests().size() == 4);
  CHECK(second.requests().size() == 2);
}

TEST_CASE("support::HttpProxy answers a rule's status itself and drops the connection for status 0") {
  FaultServer backend = http_proxy_test::named_backend("backend");
  HttpProxy proxy(ProxyOptions{{backend.url()}, {}, {}});
  proxy.set_rules({ProxyRule{"PUT", "", "if-none-match", 501}, ProxyRule{"", "/drop", "", 0}});

  CHECK(opcache::test::http_request("PUT", proxy.url() + "/lease", {"If-None-Match: *"}, "{}").status == 501);
  CHECK(opcache::test::http_request("PUT", proxy.url() + "/lease", {}, "{}").status == 200);
  CHECK(opcache::test::http_request("GET", proxy.url() + "/lease", {"If-None-Match: *"}).status == 200);
  auto dropped = opcache::test::http_request("GET", proxy.url() + "/drop/this");
  CHECK(dropped.status == 0);
  CHECK_FALSE(dropped.error.empty());

  const auto seen = proxy.requests();
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].status == 501);
  CHECK(seen[0].backend == ProxiedRequest::k_no_backend);
  CHECK(seen[0].has_header("if-none-match"));
  CHECK(seen[3].status == 0);
  CHECK(backend.requests().size() == 2);  // the two requests no rule took

  proxy.set_rules({});
  CHECK(opcache::test::http_request("GET", proxy.url() + "/drop/this").status == 200);
}
