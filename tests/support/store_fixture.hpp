// A LocalStore for the store's own tests: opened on a directory, with a
// clock the test sets and the warnings it printed kept.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "store/aging.hpp"
#include "store/local_store.hpp"

namespace opcache::test {

/// A store at `root` whose clock reads `now_ms` and whose warnings go to
/// `warnings`. REQUIREs that it opens. Not movable: the callbacks point
/// into it.
struct StoreFixture {
  explicit StoreFixture(const std::filesystem::path& root_dir, store::AgingPolicy aging = {},
                        std::int64_t start_ms = 1'700'000'000'000);
  StoreFixture(const StoreFixture&) = delete;
  StoreFixture& operator=(const StoreFixture&) = delete;

  store::LocalStore& operator*() { return *store; }
  store::LocalStore* operator->() { return store.get(); }

  std::filesystem::path root;
  std::int64_t now_ms;  ///< what the store's clock reads; tests move it
  std::vector<std::string> warnings;
  std::unique_ptr<store::LocalStore> store;
};

}  // namespace opcache::test
