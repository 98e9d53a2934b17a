#include "tests/support/store_fixture.hpp"

#include <doctest/doctest.h>

namespace opcache::test {

StoreFixture::StoreFixture(const std::filesystem::path& root_dir, store::AgingPolicy aging, std::int64_t start_ms)
    : root(root_dir), now_ms(start_ms) {
  store::StoreOptions options;
  options.root = root;
  options.aging = aging;
  options.clock = [this] { return now_ms; };
  options.warn = [this](const std::string& message) { warnings.push_back(message); };
  auto opened = store::LocalStore::open(std::move(options));
  REQUIRE_MESSAGE(opened.ok(), (opened.ok() ? "" : opened.error().message()));
  store = std::move(opened).value();
}

}  // namespace opcache::test
