// server/http_response: a bundle's response head, rendered into a session's
// spare RenderedBundleResponse or a new one, is the same bytes either way.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <variant>

#include "opcache/version.hpp"
#include "server/http_response.hpp"

namespace http_response_test {

using opcache::server::ApiResponse;
using opcache::server::entry_response;
using opcache::server::RenderedBundleResponse;
using opcache::server::StoredBundle;
using opcache::server::to_message;

// A 200 answer about a bundle of `bytes` held in memory, with digest `digest`.
ApiResponse bundle_answer(const std::string& bytes, const std::string& digest) {
  ApiResponse response = entry_response(digest, {}, "");
  StoredBundle bundle;
  bundle.memory = std::make_shared<const std::string>(bytes);
  bundle.size = static_cast<std::int64_t>(bytes.size());
  bundle.digest = digest;
  response.bundle = std::move(bundle);
  return response;
}

std::shared_ptr<RenderedBundleResponse> rendered_of(ApiResponse response, bool close,
                                                    std::shared_ptr<RenderedBundleResponse> spare = nullptr) {
  auto outgoing = to_message(std::move(response), false, close, std::move(spare));
  REQUIRE(std::holds_alternative<std::shared_ptr<RenderedBundleResponse>>(outgoing.message));
  return std::get<std::shared_ptr<RenderedBundleResponse>>(outgoing.message);
}

}  // namespace http_response_test

TEST_CASE("server::to_message renders a bundle's head into the spare it is given, the same bytes as a new one") {
  using namespace http_response_test;
  const std::string digest(64, 'a');
  const std::string long_bytes(5000, 'x');
  const std::string short_bytes(7, 'y');

  auto first = rendered_of(bundle_answer(long_bytes, digest), true);
  CHECK(first->head == "HTTP/1.1 200 OK\r\nServer: opcache/" + std::string(opcache::k_version_string) +
                           "\r\nContent-Type: application/vnd.opcache.bundle\r\nETag: \"" + digest +
                           "\"\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n");
  CHECK(*first->body == long_bytes);

  // A spare only this caller holds is reused: the shorter head replaces the
  // longer one whole, and the body is the new bundle's.
  RenderedBundleResponse* const spare_address = first.get();
  auto second = rendered_of(bundle_answer(short_bytes, digest), false, std::move(first));
  CHECK(second.get() == spare_address);
  const auto fresh = rendered_of(bundle_answer(short_bytes, digest), false);
  CHECK(second->head == fresh->head);
  CHECK(second->head.find("Content-Length: 7\r\n\r\n") != std::string::npos);
  CHECK(second->head.find("Connection") == std::string::npos);
  CHECK(*second->body == short_bytes);

  // A spare still held elsewhere (a write in progress) is left alone.
  const auto held = second;
  auto third = rendered_of(bundle_answer(long_bytes, digest), false, second);
  CHECK(third.get() != held.get());
  CHECK(*held->body == short_bytes);
  CHECK(*third->body == long_bytes);
}
