// The route table (server/routes.hpp): every route is reachable through the
// router, has a handler the dispatch runs, runs on the thread it names, and is
// listed in docs/protocol.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "opcache_test_paths.hpp"
#include "server/api.hpp"
#include "server/local_storage.hpp"
#include "server/request_dispatch.hpp"
#include "server/routes.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::server;
using opcache::test::read_text;

namespace {

const std::string k_path_key(64, 'a');

// A path `pattern` matches, with a valid key, lease id and dashboard file.
std::string sample_path(std::string_view pattern) {
  std::string path(pattern);
  for (auto [capture, value] : {std::pair{"{key}", k_path_key}, std::pair{"{id}", std::string("0123abcd")},
                                std::pair{"{file}", std::string("app.js")}}) {
    if (auto at = path.find(capture); at != std::string::npos) {
      path.replace(at, std::string_view(capture).size(), value);
    }
  }
  return path;
}

// The methods of "GET, HEAD".
std::vector<std::string> methods_of(std::string_view methods) {
  std::vector<std::string> split;
  std::stringstream stream{std::string(methods)};
  for (std::string method; std::getline(stream, method, ',');) {
    split.push_back(method.substr(method.find_first_not_of(' ')));
  }
  return split;
}

// A request for `method` on `path`, authorized as "tester".
ApiRequest request_for(const std::string& method, const std::string& path, bool may_read = false) {
  ApiRequest request;
  request.route = match_route(method, path);
  request.method = method;
  request.token_name = "tester";
  request.may_read = may_read;
  return request;
}

// Handlers over a local storage in a scratch directory.
struct TempStorageApi {
  TempStorageApi() {
    opcache::store::StoreOptions options;
    options.root = temp.path() / "store";
    storage = std::move(make_local_storage(std::move(options), 1u << 20)).value();
    api = std::make_unique<Api>(*storage, metrics, config);
  }

  // The call plan_call makes for `method` on `spec`'s sample path.
  ApiCall plan(const RouteSpec& spec, const std::string& method, bool reads_are_local = true, bool may_read = false) {
    ApiRequest request = request_for(method, sample_path(spec.pattern), may_read);
    if (spec.body == BodyKind::upload) {
      auto file = api->create_upload();
      REQUIRE(file.ok());
      REQUIRE(file->write("not a bundle", 12).ok());
      request.upload = std::make_shared<opcache::base::AtomicFile>(std::move(*file));
    }
    return plan_call(*api, config, reads_are_local, std::move(request));
  }

  opcache::test::TempDir temp;
  ServerConfig config;
  Metrics metrics;
  std::unique_ptr<Storage> storage;
  std::unique_ptr<Api> api;
};

// The lines of docs/protocol.md's "## Routes" section that are table rows (not its header).
std::vector<std::string> documented_routes() {
  const std::string doc = read_text(std::filesystem::path(OPCACHE_SOURCE_DIR) / "docs" / "protocol.md");
  const auto start = doc.find("\n## Routes\n");
  REQUIRE(start != std::string::npos);
  std::stringstream section{doc.substr(start + 1, doc.find("\n## ", start + 1) - start)};
  std::vector<std::string> rows;
  for (std::string line; std::getline(section, line);) {
    if (line.rfind("| `", 0) == 0) {
      rows.push_back(line);
    }
  }
  return rows;
}

// The row docs/protocol.md has for `spec`.
std::string documented_row(const RouteSpec& spec) {
  std::string methods;
  for (const auto& method : methods_of(spec.methods)) {
    methods += (methods.empty() ? "`" : ", `") + method + "`";
  }
  const char* body = spec.body == BodyKind::none ? "none" : spec.body == BodyKind::small ? "JSON" : "bundle";
  return "| `" + std::string(spec.name) + "` | " + methods + " | `" + std::string(spec.pattern) + "` | `" +
         to_string(spec.scope) + "` | " + body + " | " + std::string(usage_rule_name(spec.usage)) + " |";
}

}  // namespace

TEST_CASE("server::routes every route resolves through match_route to itself, with its scope and body") {
  std::set<RouteId> seen;
  for (const RouteSpec& spec : routes()) {
    CAPTURE(spec.pattern);
    CHECK(spec.id != RouteId::unknown);
    CHECK(seen.insert(spec.id).second);  // one row per route
    CHECK(find_route(spec.id) == &spec);
    const bool has_handler = spec.handler != nullptr;
    CHECK(has_handler);
    for (const auto& method : methods_of(spec.methods)) {
      CAPTURE(method);
      const Route route = match_route(method, sample_path(spec.pattern));
      CHECK(route.error_status == 0);
      CHECK(route.id == spec.id);
      CHECK(route.scope == spec.scope);
      CHECK(route.body == spec.body);
    }
  }
  CHECK(route_name(RouteId::unknown) == "unknown");
  CHECK(route_name(RouteId::entry_put) == "entry");
}

TEST_CASE("server::routes every route has a handler that plan_call runs (none answers 500 no handler)") {
  TempStorageApi served;
  for (const RouteSpec& spec : routes()) {
    for (const auto& method : methods_of(spec.methods)) {
      CAPTURE(spec.pattern);
      CAPTURE(method);
      const ApiResponse response = served.plan(spec, method).run();
      CHECK(response.status != 500);
      CHECK(response.body.find("no handler") == std::string::npos);
    }
  }
  // Without the table's row there is nothing to run: the 500 the walk above rules out.
  const ApiResponse refused = plan_call(*served.api, served.config, true, request_for("GET", "/nowhere")).run();
  CHECK(refused.status == 500);
  CHECK(refused.body.find("no handler for route unknown") != std::string::npos);
}

TEST_CASE("server::routes plan_call answers each route on the thread the table names") {
  TempStorageApi served;
  for (const RouteSpec& spec : routes()) {
    CAPTURE(spec.pattern);
    const std::string method = methods_of(spec.methods).front();
    switch (spec.thread) {
      case Thread::io:
        CHECK(served.plan(spec, method, false).on_io_thread);
        break;
      case Thread::worker:
        CHECK_FALSE(served.plan(spec, method, true).on_io_thread);
        break;
      case Thread::storage_read:
        CHECK(served.plan(spec, method, true).on_io_thread);
        CHECK_FALSE(served.plan(spec, method, false).on_io_thread);
        break;
      case Thread::page:
        CHECK(served.plan(spec, method, true, true).on_io_thread);  // app.js: no figures
        break;
    }
  }
  // The page itself carries the figures for a reader: a worker's job; not for anyone else.
  const RouteSpec& page = *find_route(RouteId::ui);
  ApiRequest reader = request_for("GET", "/ui/", true);
  CHECK_FALSE(plan_call(*served.api, served.config, true, reader).on_io_thread);
  reader.may_read = false;
  CHECK(plan_call(*served.api, served.config, true, reader).on_io_thread);
  CHECK(page.thread == Thread::page);
}

TEST_CASE("server::routes docs/protocol.md lists every route of the table and no other") {
  const auto rows = documented_routes();
  for (const RouteSpec& spec : routes()) {
    const std::string row = documented_row(spec);
    CAPTURE(row);
    CHECK(std::find(rows.begin(), rows.end(), row) != rows.end());
  }
  CHECK(rows.size() == routes().size());
  // And the metric's route label names each route once.
  std::string labels;
  std::set<std::string_view> named;
  for (const RouteSpec& spec : routes()) {
    if (named.insert(spec.name).second) {
      labels += "`" + std::string(spec.name) + "`, ";
    }
  }
  const std::string doc = read_text(std::filesystem::path(OPCACHE_SOURCE_DIR) / "docs" / "protocol.md");
  CHECK(doc.find("`route` is one of " + labels + "`unknown`") != std::string::npos);
}

TEST_CASE("server::match_pattern captures up to the next literal, up to a final literal, or the rest") {
  auto lease = match_pattern("/v1/leases/{key}/{id}", "/v1/leases/abc/de/f");
  REQUIRE(lease.has_value());
  CHECK(lease->key == "abc");  // up to the first "/"
  CHECK(lease->id == "de/f");  // the rest
  auto signed_entry = match_pattern("/v1/entries/{key}/signatures", "/v1/entries/a/b/signatures");
  REQUIRE(signed_entry.has_value());
  CHECK(signed_entry->key == "a/b");  // up to the literal that ends the path
  auto page = match_pattern("/ui/{file}", "/ui/");
  REQUIRE(page.has_value());
  CHECK(page->file.empty());
  CHECK_FALSE(match_pattern("/v1/leases/{key}/{id}", "/v1/leases/abc").has_value());
  CHECK_FALSE(match_pattern("/v1/entries/{key}/signatures", "/v1/entries/a/signaturesx").has_value());
  CHECK_FALSE(match_pattern("/v1/status", "/v1/status/").has_value());
  CHECK_FALSE(match_pattern("/v1/{unknown}", "/v1/x").has_value());
}

TEST_CASE("server::match_route names the statistics there are for an unknown one, from the table") {
  const Route route = match_route("GET", "/v1/stats/keys");
  CHECK(route.error_status == 404);
  CHECK(route.error_message ==
        "no such statistics: /v1/stats/keys (there are /v1/stats/summary, timeseries, "
        "misses and tokens)");
  CHECK(match_route("GET", "/v2/x").error_message ==
        "no such endpoint: /v2/x (the API lives under /v1/, see docs/protocol.md)");
}
