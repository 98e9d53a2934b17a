// The file:// remote (a shared directory): upload queue, layered get,
// read-only, push/pull, and what it does with damaged files in the share.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "opcache/opcache.hpp"
#include "base/sha256.hpp"
#include "tests/support/remote_fixtures.hpp"
#include "tests/support/temp_dir.hpp"

using namespace opcache::test;
using opcache::ErrorCode;
using opcache::Store;
namespace fs = std::filesystem;

namespace {

fs::path shared_path(const fs::path& share, const std::string& key) {
  return share / "v1" / "bundles" / key.substr(0, 2) / key;
}

}  // namespace

TEST_CASE("remote::file: uploads land as whole bundles in the share, and another store gets them from there") {
  TempDir temp;
  const fs::path share = temp / "share";
  const std::string url = "file://" + share.string();
  const TestKernel kernel = make_test_kernel(temp / "src", "square", 12);
  {
    Store producer = open_remote_store(temp / "producer", {url + "|upload"});
    put_kernel(producer, kernel);
    CHECK(eventually([&] { return fs::exists(shared_path(share, kernel.key)); }));
  }
  CHECK(count_files(share / "tmp") == 0);  // written through tmp/, nothing left there

  WarningLog warnings;
  Store consumer = open_remote_store(temp / "consumer", {url}, &warnings);
  auto got = consumer.get(kernel.key, temp / "out");
  REQUIRE_MESSAGE(got.ok(), got.error().message());
  REQUIRE(got->has_value());
  CHECK(directory_contents(temp / "out") == kernel.contents());
  CHECK(counter(consumer, "remote_hits") == 1);

  // Stored locally: it survives the share's disappearance.
  fs::remove_all(share);
  auto again = consumer.get(kernel.key, temp / "out2");
  REQUIRE(again.ok());
  REQUIRE(again->has_value());
  CHECK(directory_contents(temp / "out2") == kernel.contents());
  CHECK(counter(consumer, "remote_hits") == 1);
  CHECK_MESSAGE(warnings.all().empty(), warnings.joined());
}

TEST_CASE("remote::file: damaged or mis-keyed files in the share are misses and never stored") {
  TempDir temp;
  const fs::path share = temp / "share";
  const TestKernel wanted = make_test_kernel(temp / "src", "relu", 8);
  const TestKernel other = make_test_kernel(temp / "src", "relu", 9);
  const std::vector<std::string> contents = {other.bundle, wanted.bundle.substr(0, wanted.bundle.size() - 7),
                                             std::string(100, '\0')};
  for (const auto& content : contents) {
    CAPTURE(content.size());
    TempDir cache;
    write_text(shared_path(share, wanted.key), content);
    WarningLog warnings;
    Store store = open_remote_store(cache.path(), {"file://" + share.string()}, &warnings);
    auto got = store.get(wanted.key, temp / "out");
    REQUIRE_MESSAGE(got.ok(), got.error().message());
    CHECK_FALSE(got->has_value());
    CHECK_MESSAGE(warnings.contains("failed verification; not stored"), warnings.joined());
    CHECK(counter(store, "remote_corrupt") == 1);
    CHECK_FALSE(*store.contains(wanted.key));
    CHECK_FALSE(*store.contains(other.key));
    CHECK(count_files(cache.path() / "objects") == 0);
    CHECK(count_files(cache.path() / "tmp") == 0);
  }
  CHECK(count_files(temp / "out") == 0);
}

TEST_CASE("remote::file: a read-only share receives nothing: push and pull move exactly what is missing") {
  TempDir temp;
  const fs::path share = temp / "share";
  const std::string url = "file://" + share.string();
  std::vector<TestKernel> kernels;
  for (int i = 0; i < 5; ++i) {
    kernels.push_back(make_cheap_kernel(temp / "src", i));
  }
  Store source = open_remote_store(temp / "source", {url + "|read-only|upload"});
  for (const auto& kernel : kernels) {
    put_kernel(source, kernel);
  }
  auto refused = source.push({});
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::usage);
  CHECK(count_files(share) == 0);

  Store writer = open_remote_store(temp / "source", {url});
  Store::TransferOptions some;
  some.keys = {kernels[0].key, kernels[1].key};
  auto first = writer.push(some);
  REQUIRE_MESSAGE(first.ok(), first.error().message());
  CHECK(first->requested == 2);
  CHECK(first->transferred == 2);
  CHECK(first->failed == 0);
  auto all = writer.push({});
  REQUIRE(all.ok());
  CHECK(all->requested == 5);
  CHECK(all->skipped == 2);
  CHECK(all->transferred == 3);
  CHECK(all->failed == 0);
  CHECK(all->bytes > 0);
  for (const auto& kernel : kernels) {
    CHECK(fs::exists(shared_path(share, kernel.key)));
  }

  Store reader = open_remote_store(temp / "reader", {url});
  Store::TransferOptions two;
  two.keys = {kernels[3].key, kernels[4].key, opcache::base::sha256_hex("nobody has this")};
  auto partial = reader.pull(two);
  REQUIRE(partial.ok());
  CHECK(partial->requested == 3);
  CHECK(partial->transferred == 2);
  CHECK(partial->skipped == 1);  // absent on the remote too
  CHECK(partial->failed == 0);
  auto rest = reader.pull({});  // everything the share lists
  REQUIRE_MESSAGE(rest.ok(), rest.error().message());
  CHECK(rest->requested == 5);
  CHECK(rest->transferred == 3);
  CHECK(rest->skipped == 2);
  for (const auto& kernel : kernels) {
    const fs::path out = temp / ("out-" + kernel.key.substr(0, 8));
    auto got = reader.get(kernel.key, out);
    REQUIRE(got.ok());
    REQUIRE(got->has_value());
    CHECK(directory_contents(out) == kernel.contents());
  }
  CHECK(counter(reader, "remote_hits") == 0);  // pulled, not fetched on demand
}
