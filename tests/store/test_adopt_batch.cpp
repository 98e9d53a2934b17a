// LocalStore::adopt_batch (what pull stores a batch response with): many
// verified bundles, their rows in one transaction, one outcome per bundle in
// order — new entries stored with their key records, entries already there
// (or twice in the batch) kept, a bundle for another key refused before it.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/byte_stream.hpp"
#include "store/bundle_writer.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"
#include "tests/support/bundle_inputs.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/store_fixture.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using opcache::ErrorCode;
using opcache::ReplacePolicy;
using opcache::base::Durability;
using opcache::store::BundleInput;
using opcache::store::LocalStore;
using opcache::store::VerifiedBundle;

std::string batch_key_of(const BundleInput& input) {
  auto key = opcache::store::derive_key(input.descriptor, input.scenario);
  REQUIRE(key.ok());
  return *key;
}

// The bundle of `input` written to a temp file of `store` and verified for
// `expected_key` (its own key unless given).
opcache::Result<VerifiedBundle> verified_bundle_of(LocalStore& store, const BundleInput& input,
                                                   const std::string& expected_key) {
  auto file = store.create_temp();
  REQUIRE(file.ok());
  opcache::base::FdSink sink(file->fd(), file->temp_path());
  REQUIRE(opcache::store::write_bundle(input, sink).ok());
  return store.verify_for_adoption(std::move(*file), expected_key, Durability::deferred, {});
}

std::int64_t batch_store_counter(LocalStore& store, const std::string& name) {
  auto stats = store.stats();
  REQUIRE(stats.ok());
  auto it = stats->counters.find(name);
  return it == stats->counters.end() ? 0 : it->second;
}

bool has_regular_file(const std::filesystem::path& path) { return std::filesystem::is_regular_file(path); }

}  // namespace

TEST_CASE("store::LocalStore adopt_batch stores many verified bundles, one outcome per bundle in order") {
  opcache::test::TempDir temp;
  opcache::test::StoreFixture store(temp / "cache");
  std::vector<BundleInput> inputs;
  for (int i = 0; i < 4; ++i) {
    inputs.push_back(opcache::test::input_for(opcache::test::make_kernel(temp / "src", "square", 16 + i)));
  }
  // The first is stored already; the third comes twice in the batch.
  auto first = verified_bundle_of(*store, inputs[0], batch_key_of(inputs[0]));
  REQUIRE(first.ok());
  REQUIRE(store->adopt_batch({}, ReplacePolicy::keep_existing, Durability::deferred).empty());
  std::vector<VerifiedBundle> one;
  one.push_back(std::move(*first));
  REQUIRE(store->adopt_batch(std::move(one), ReplacePolicy::keep_existing, Durability::deferred)[0].ok());

  std::vector<VerifiedBundle> batch;
  for (int i : {0, 1, 2, 2, 3}) {
    auto bundle = verified_bundle_of(*store, inputs[static_cast<std::size_t>(i)],
                                     batch_key_of(inputs[static_cast<std::size_t>(i)]));
    REQUIRE(bundle.ok());
    batch.push_back(std::move(*bundle));
  }
  const auto outcomes = store->adopt_batch(std::move(batch), ReplacePolicy::keep_existing, Durability::deferred);
  REQUIRE(outcomes.size() == 5);
  const std::vector<int> which = {0, 1, 2, 2, 3};
  const std::vector<bool> stored = {false, true, true, false, true};
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    REQUIRE_MESSAGE(outcomes[i].ok(), outcomes[i].error().message());
    CHECK(outcomes[i]->key == batch_key_of(inputs[static_cast<std::size_t>(which[i])]));
    CHECK(outcomes[i]->stored == stored[i]);
  }
  CHECK(outcomes[2]->digest == outcomes[3]->digest);
  CHECK(batch_store_counter(*store, "stores") == 4);  // the first one earlier, three now
  CHECK(batch_store_counter(*store, "already_present") == 2);

  // Every entry has its row, its object and its key record, and hits.
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto key = batch_key_of(inputs[i]);
    auto row = store->lookup(key);
    REQUIRE(row.ok());
    REQUIRE(row->has_value());
    CHECK(has_regular_file(store->layout().object_path((*row)->digest)));
    CHECK(has_regular_file(store->layout().root() / "keys" / key.substr(0, 2) / key));
    auto hit = store->get(key, temp / ("out-" + std::to_string(i)));
    REQUIRE(hit.ok());
    CHECK(hit->has_value());
  }
  CHECK(std::filesystem::is_empty(store->layout().tmp()));
  auto report = store->verify(false);
  REQUIRE(report.ok());
  CHECK(report->problems.empty());
}

TEST_CASE("store::LocalStore verify_for_adoption refuses a bundle for another key before adopt_batch sees it") {
  opcache::test::TempDir temp;
  opcache::test::StoreFixture store(temp / "cache");
  const auto wanted = opcache::test::input_for(opcache::test::make_kernel(temp / "src", "square", 16));
  const auto delivered = opcache::test::input_for(opcache::test::make_kernel(temp / "src", "relu", 16));
  auto refused = verified_bundle_of(*store, delivered, batch_key_of(wanted));
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == ErrorCode::corrupt);
  CHECK(refused.error().message().find("not the requested " + batch_key_of(wanted)) != std::string::npos);
  CHECK(std::filesystem::is_empty(store->layout().tmp()));  // its temp file went with it
  CHECK(batch_store_counter(*store, "stores") == 0);
}
