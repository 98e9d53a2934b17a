// The server's local storage (server/local_storage.hpp) behind the API's
// handlers (server/api.hpp), without HTTP: small bundles are answered from
// memory after the first read; a DELETE is seen by the next GET, a delete or
// replacement by another process sharing the store within a second.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/byte_stream.hpp"
#include "server/api.hpp"
#include "server/local_storage.hpp"
#include "store/bundle_writer.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using opcache::server::Api;
using opcache::server::ApiResponse;
using opcache::test::eventually;
using opcache::test::TempDir;
using opcache::test::TestKernel;

constexpr std::size_t k_cache_bytes = 1 << 20;

// A local storage on `root` with the handlers in front of it.
struct LocalStorageApi {
  explicit LocalStorageApi(const fs::path& root, std::size_t cache_bytes = k_cache_bytes,
                           std::size_t open_files = opcache::server::default_open_file_budget()) {
    opcache::store::StoreOptions options;
    options.root = root;
    auto storage_opened = opcache::server::make_local_storage(std::move(options), cache_bytes, open_files);
    REQUIRE_MESSAGE(storage_opened.ok(), (storage_opened.ok() ? "" : storage_opened.error().message()));
    storage = std::move(storage_opened).value();
    api = std::make_unique<Api>(*storage, metrics, config);
  }

  // PUT /v1/entries/{key} with `bundle` as the body.
  ApiResponse put(const std::string& key, const std::string& bundle) {
    auto upload = api->create_upload();
    REQUIRE(upload.ok());
    REQUIRE(upload->write(bundle.data(), bundle.size()).ok());
    return api->put_entry(key, std::move(*upload));
  }

  // GET /v1/entries/{key}: the status and, for 200, the body's bytes.
  std::pair<int, std::string> get(const std::string& key) {
    auto response = api->get_entry(key, false, "");
    if (response.status != 200) {
      return {response.status, ""};
    }
    REQUIRE(response.bundle.has_value());
    REQUIRE(response.bundle->memory != nullptr);  // small bundles always come from memory
    CHECK(response.bundle->size == static_cast<std::int64_t>(response.bundle->memory->size()));
    return {200, *response.bundle->memory};
  }

  opcache::server::ServerConfig config;
  opcache::server::Metrics metrics;
  std::unique_ptr<opcache::server::Storage> storage;
  std::unique_ptr<Api> api;
};

// Another process's view of the same store.
std::unique_ptr<opcache::store::LocalStore> open_other(const fs::path& root) {
  opcache::store::StoreOptions options;
  options.root = root;
  auto opened = opcache::store::LocalStore::open(std::move(options));
  REQUIRE(opened.ok());
  return std::move(opened).value();
}

// A second, different bundle for `kernel`'s key: same descriptor and
// scenario, other member bytes (what a forced rebuild stores).
std::string rebuilt_bundle(const TestKernel& kernel, const fs::path& dir) {
  auto no_env = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto scenario = opcache::store::parse_scenario_spec(opcache::test::k_test_scenario, no_env);
  REQUIRE(scenario.ok());
  opcache::store::BundleInput input;
  input.descriptor = nlohmann::json::parse(kernel.descriptor_json);
  input.scenario = opcache::store::scenario_to_json(*scenario);
  for (const auto& file : kernel.files) {
    opcache::test::write_text(dir / file.filename(), "rebuilt " + opcache::test::read_text(file));
    input.members.push_back({file.filename().string(), dir / file.filename(), ""});
  }
  opcache::base::StringSink sink;
  auto written = opcache::store::write_bundle(input, sink);
  REQUIRE(written.ok());
  REQUIRE(written->manifest.key == kernel.key);
  return sink.data();
}

}  // namespace

TEST_CASE("server::local storage answers repeated GETs of a small bundle from memory, and after a DELETE with 404") {
  TempDir temp;
  auto kernel = opcache::test::make_cheap_kernel(temp / "kernels", 1);
  LocalStorageApi served(temp / "store");
  REQUIRE(served.put(kernel.key, kernel.bundle).status == 201);
  for (int i = 0; i < 3; ++i) {
    auto [status, bytes] = served.get(kernel.key);
    CHECK(status == 200);
    CHECK(bytes == kernel.bundle);
  }
  CHECK(served.api->delete_entry(kernel.key).status == 200);
  CHECK(served.get(kernel.key).first == 404);
  // Stored again after the delete: served again.
  REQUIRE(served.put(kernel.key, kernel.bundle).status == 201);
  CHECK(served.get(kernel.key) == std::make_pair(200, kernel.bundle));
}

TEST_CASE("server::local storage serves the new bytes of an entry another process replaced, and a 404 once it removed it") {
  TempDir temp;
  auto kernel = opcache::test::make_cheap_kernel(temp / "kernels", 2);
  const std::string rebuilt = rebuilt_bundle(kernel, temp / "rebuilt");
  REQUIRE(rebuilt != kernel.bundle);
  LocalStorageApi served(temp / "store");
  REQUIRE(served.put(kernel.key, kernel.bundle).status == 201);
  REQUIRE(served.get(kernel.key).second == kernel.bundle);  // now held in memory

  auto other = open_other(temp / "store");
  auto temp_file = other->create_temp();
  REQUIRE(temp_file.ok());
  REQUIRE(temp_file->write(rebuilt.data(), rebuilt.size()).ok());
  auto replaced = other->adopt(std::move(*temp_file), kernel.key, opcache::ReplacePolicy::replace);
  REQUIRE_MESSAGE(replaced.ok(), (replaced.ok() ? "" : replaced.error().message()));
  REQUIRE(replaced->stored);
  // Within the recheck interval (1 s) the old bytes, a valid bundle for the key, may still be served.
  CHECK(eventually([&] { return served.get(kernel.key) == std::make_pair(200, rebuilt); }));

  auto removed = other->remove(kernel.key);
  REQUIRE(removed.ok());
  REQUIRE(*removed);
  CHECK(eventually([&] { return served.get(kernel.key).first == 404; }));
}

TEST_CASE("server::local storage with no memory for bundles still answers every GET with the stored bytes") {
  TempDir temp;
  auto first = opcache::test::make_cheap_kernel(temp / "kernels", 3);
  auto second = opcache::test::make_cheap_kernel(temp / "kernels", 4);
  LocalStorageApi served(temp / "store", 0);
  REQUIRE(served.put(first.key, first.bundle).status == 201);
  REQUIRE(served.put(second.key, second.bundle).status == 201);
  for (int i = 0; i < 2; ++i) {
    CHECK(served.get(first.key) == std::make_pair(200, first.bundle));
    CHECK(served.get(second.key) == std::make_pair(200, second.bundle));
  }
}

// The bytes of `file` from its start, up to `size` (pread: the offset is shared).
std::string read_kept_file(const opcache::base::FileDescriptor& file, std::size_t size) {
  std::string bytes(size + 1, '\0');
  const ssize_t got = ::pread(file.get(), bytes.data(), bytes.size(), 0);
  REQUIRE(got >= 0);
  bytes.resize(static_cast<std::size_t>(got));
  return bytes;
}

TEST_CASE("server::local storage keeps the files of large bundles in memory open, within its budget of open files") {
  TempDir temp;
  auto small = opcache::test::make_cheap_kernel(temp / "kernels", 5);
  auto first = opcache::test::make_large_kernel(temp / "kernels", 6, 64 * 1024);
  auto second = opcache::test::make_large_kernel(temp / "kernels", 7, 64 * 1024);
  REQUIRE(small.bundle.size() < opcache::server::k_zero_copy_bytes);
  REQUIRE(first.bundle.size() >= opcache::server::k_zero_copy_bytes);
  LocalStorageApi served(temp / "store", k_cache_bytes, /*open_files=*/1);
  for (const auto* kernel : {&small, &first, &second}) {
    REQUIRE(served.put(kernel->key, kernel->bundle).status == 201);
  }
  auto open = [&](const TestKernel& kernel) {
    auto opened = served.storage->open(kernel.key);
    REQUIRE(opened.ok());
    REQUIRE(opened->has_value());
    REQUIRE((*opened)->memory != nullptr);
    CHECK(*(*opened)->memory == kernel.bundle);
    return std::move(**opened);
  };
  CHECK(open(small).memory_file == nullptr);  // small bundles go out from memory alone
  for (int i = 0; i < 2; ++i) {  // the first read and a hit in memory
    auto large = open(first);
    REQUIRE(large.memory_file != nullptr);
    CHECK(read_kept_file(*large.memory_file, first.bundle.size()) == first.bundle);
  }
  // The budget of one file is spent: the second large bundle is served from memory alone.
  auto over_budget = open(second);
  CHECK(over_budget.memory_file == nullptr);
  CHECK(*over_budget.memory == second.bundle);
  // A delete drops the first bundle, and its file once nobody sends it: the budget is free again.
  REQUIRE(served.api->delete_entry(first.key).status == 200);
  auto third = opcache::test::make_large_kernel(temp / "kernels", 8, 64 * 1024);
  REQUIRE(served.put(third.key, third.bundle).status == 201);
  auto freed = open(third);
  REQUIRE(freed.memory_file != nullptr);
  CHECK(read_kept_file(*freed.memory_file, third.bundle.size()) == third.bundle);
}
