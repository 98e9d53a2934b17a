// Fuzz target: the team server's request handling, in memory. The bytes are
// what a client sends on one connection; each request is taken through the
// steps of server/http_session.cpp, without sockets or threads:
//   Beast's request parser with the server's limits (header limit, then the
//   route's body limit) → route_target (server/api) → TokenTable::authorize
//   (server/auth) → the body rule of the route (an upload's
//   X-Opcache-Signature headers) → the handler server/request_dispatch picks
//   from the routes of server/routes.hpp (an upload's too),
//   on a local storage in a scratch directory → metrics, access log and usage
//   statistics records (server/usage_stats, with the X-Opcache-Op-Type and
//   X-Opcache-Scenario lookup hints),
// repeating while the request keeps the connection alive, as the session does.
// The tokens known to this server are "read-token", "write-token" and
// "admin-token" (seeds send them in Authorization headers).
// An upload's body is parsed as a string and then written to the storage's
// upload file (the session streams it into that file with file_body; the
// parsing is the same).
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/access_log.hpp"
#include "server/api.hpp"
#include "server/auth.hpp"
#include "server/local_storage.hpp"
#include "server/request_dispatch.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
using namespace opcache;
using namespace opcache::server;

// One server: storage, metrics, configuration, tokens and logs, kept for the
// whole process as a real server keeps them across connections.
struct Server {
  Server() {
    store::StoreOptions options;
    options.root = fuzz::scratch_directory() / "store";
    storage = std::move(make_local_storage(std::move(options), 1u << 20)).value();
    api = std::make_unique<Api>(*storage, metrics, config);
    std::string tokens_text;
    for (const char* scope : {"read", "write", "admin"}) {
      tokens_text += hash_token(std::string(scope) + "-token") + " " + scope + "-client " + scope + "\n";
    }
    tokens = std::move(TokenTable::parse(tokens_text, "tokens")).value();
    text_log.emplace(std::move(AccessLog::open("/dev/null", LogFormat::text)).value());
    json_log.emplace(std::move(AccessLog::open("/dev/null", LogFormat::json)).value());
  }

  ServerConfig config;
  Metrics metrics;
  std::unique_ptr<Storage> storage;
  std::unique_ptr<Api> api;
  TokenTable tokens;
  std::optional<AccessLog> text_log;
  std::optional<AccessLog> json_log;
};

Server& server() {
  static Server instance;
  return instance;
}

// Feeds `input` to `parser` until it has read what it was asked for (the
// header, or the whole message); consumes the bytes used.
template <class Parser>
beast::error_code feed(Parser& parser, std::string_view& input) {
  beast::error_code ec;
  while (!ec && !(parser.is_header_done() && (!parser.eager() || parser.is_done()))) {
    if (input.empty()) {
      if (!parser.got_some()) {
        return http::error::partial_message;  // no bytes at all: put_eof asserts it had some
      }
      parser.put_eof(ec);
      return ec ? ec : http::error::partial_message;
    }
    const auto used = parser.put(boost::asio::buffer(input.data(), input.size()), ec);
    input.remove_prefix(used);
    if (used == 0 && (!ec || ec == http::error::need_more)) {
      return http::error::partial_message;  // all the input there is does not complete it
    }
    if (ec == http::error::need_more) {
      ec = {};
    }
  }
  return ec;
}

// One request: what the session would answer, and whether the connection goes on.
struct Outcome {
  ApiResponse response;
  bool keep_going = false;
};

// A request's lookup hints, for the usage statistics.
struct LookupHints {
  std::string op_type;
  std::string scenario;
};

Outcome stop_with(ApiResponse response) { return {std::move(response), false}; }

// The handler the session would call (server/request_dispatch), run here
// and now; a ?wait= request is answered after its first look, as if the wait
// had ended.
ApiResponse dispatch(const RoutedTarget& routed, const std::string& method, std::string_view if_none_match,
                     const std::string& body, std::shared_ptr<base::AtomicFile> upload = nullptr,
                     store::Signatures signatures = {}) {
  ApiRequest request{routed.route,  method, routed.parameters, std::string(if_none_match), body,
                     "fuzz-client", false,  std::move(upload), std::move(signatures)};
  return plan_call(*server().api, server().config, true, std::move(request)).run();
}

// Reads the body of a small (query) or upload (PUT) route and runs its handler.
Outcome read_body_then_dispatch(http::request_parser<http::empty_body>& header, const RoutedTarget& routed,
                                const std::string& method, std::string_view& input) {
  const bool upload = routed.route.body == BodyKind::upload;
  const auto length = header.content_length();
  if (upload && !length) return stop_with(error_response(411, "length_required", "no Content-Length"));
  const std::uint64_t limit = upload ? server().config.max_body_bytes : small_body_limit(routed.route.id);
  if (length.value_or(0) > limit) return stop_with(error_response(413, "payload_too_large", "too large"));
  http::request_parser<http::string_body> parser(std::move(header));
  parser.body_limit(limit);
  parser.eager(true);
  if (auto ec = feed(parser, input)) {
    return stop_with(error_response(ec == http::error::body_limit ? 413 : 400, "bad_request", ec.message()));
  }
  const auto& request = parser.get();
  const bool keep_alive = request.keep_alive();
  if (!upload) {
    return {dispatch(routed, method, "", request.body()), keep_alive};
  }
  auto signatures = upload_signatures(request);
  if (!signatures) {
    return stop_with(error_response(400, "malformed_signature", signatures.error().message()));
  }
  auto file = server().api->create_upload();
  if (!file || !file->write(request.body().data(), request.body().size())) {
    return stop_with(error_response(503, "unavailable", "cannot write the upload"));
  }
  auto body = std::make_shared<base::AtomicFile>(std::move(*file));
  return {dispatch(routed, method, "", "", std::move(body), std::move(*signatures)), keep_alive};
}

std::optional<Outcome> answer(http::request_parser<http::empty_body>& header, std::string_view& input,
                              const std::string& method, const std::string& target);

// The steps of Session::on_header for one request; nullopt when the session
// would close without answering (end of input, or bytes that are not HTTP).
std::optional<Outcome> handle_one(std::string_view& input, std::string& method, std::string& target,
                                  LookupHints& hints) {
  http::request_parser<http::empty_body> header;
  header.header_limit(server().config.max_header_bytes);
  header.body_limit(std::numeric_limits<std::uint64_t>::max());
  if (auto ec = feed(header, input)) {
    if (ec == http::error::header_limit) return stop_with(error_response(431, "header_too_large", "too large"));
    return std::nullopt;
  }
  const auto& request = header.get();
  method = std::string(request.method_string());
  target = std::string(request.target());
  // Read before answer(), which may move the parser (and the header) away.
  hints.op_type = std::string(request[k_op_type_header]);
  hints.scenario = std::string(request[k_scenario_header]);
  return answer(header, input, method, target);
}

// What the session answers a request whose header `header` was read.
std::optional<Outcome> answer(http::request_parser<http::empty_body>& header, std::string_view& input,
                              const std::string& method, const std::string& target) {
  const auto& request = header.get();
  const auto routed = route_target(method, target);
  const bool has_body = header.chunked() || header.content_length().value_or(0) > 0;
  const bool keep_alive = request.keep_alive();
  if (routed.route.error_status != 0) {
    return Outcome{error_response(routed.route.error_status, routed.route.error_code, routed.route.error_message),
                   keep_alive && !has_body};
  }
  auto decision = server().tokens.authorize(request[http::field::authorization], routed.route.scope, false);
  if (decision.status != 200) {
    return Outcome{error_response(decision.status, "unauthorized", decision.message), keep_alive && !has_body};
  }
  if (routed.route.body != BodyKind::none) {
    return read_body_then_dispatch(header, routed, method, input);
  }
  if (has_body) return stop_with(error_response(400, "bad_request", "takes no request body"));
  return Outcome{dispatch(routed, method, request[http::field::if_none_match], ""), keep_alive};
}

void record(const RoutedTarget& routed, const std::string& method, const std::string& target, const Outcome& outcome,
            const LookupHints& hints) {
  const int status = outcome.response.status;
  server().metrics.record_request(routed.route.id, method, status, 0.001, 0, 0);
  UsageEvent event;
  event.route = routed.route.id;
  event.method = method;
  event.status = status;
  event.token_name = "fuzz-client";
  event.client = "127.0.0.1";
  event.key = routed.route.key;
  event.facts = outcome.response.bundle ? outcome.response.bundle->facts.get() : nullptr;
  event.op_type_header = hints.op_type;
  event.scenario_header = hints.scenario;
  server().api->usage().record(event);
  AccessRecord access{"127.0.0.1:1", method, target, status, 0, 0, 0.001, "-"};
  server().text_log->write(access);
  server().json_log->write(access);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto input = fuzz::as_text(data, size);
  for (int requests = 0; requests < 16; ++requests) {
    std::string method = "-";
    std::string target = "-";
    LookupHints hints;
    auto outcome = handle_one(input, method, target, hints);
    if (!outcome) {
      break;
    }
    record(route_target(method, target), method, target, *outcome, hints);
    fuzz::trace(method + " " + target + " -> " + std::to_string(outcome->response.status) + " " +
                outcome->response.body.substr(0, 120));
    if (!outcome->keep_going) {
      break;
    }
  }
  return 0;
}
