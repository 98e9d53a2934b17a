// Cache root resolution and the store layout (store/cache_root.hpp).
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>

#include "store/cache_root.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::store::CacheRoot;
using opcache::base::EnvLookup;
using opcache::store::resolve_cache_root;
using opcache::store::StoreLayout;
namespace fs = std::filesystem;

namespace {

// An environment made of exactly these variables; nothing else is set.
EnvLookup fake_env(std::map<std::string, std::string> variables) {
  return [variables = std::move(variables)](const char* name) -> std::optional<std::string> {
    auto it = variables.find(name);
    if (it == variables.end()) {
      return std::nullopt;
    }
    return it->second;
  };
}

const std::map<std::string, std::string> k_everything = {
    {"OPCACHE_DIR", "/env/opcache-dir"}, {"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/user"}};

}  // namespace

TEST_CASE("store::resolve_cache_root prefers --cache-dir over every environment variable") {
  auto root = resolve_cache_root(fs::path("/flag/dir"), fake_env(k_everything));
  REQUIRE(root.ok());
  CHECK(root->path == fs::path("/flag/dir"));
  CHECK(root->source == "--cache-dir");
}

TEST_CASE("store::resolve_cache_root uses OPCACHE_DIR before XDG_CACHE_HOME and HOME") {
  SUBCASE("no flag") {
    auto root = resolve_cache_root(std::nullopt, fake_env(k_everything));
    REQUIRE(root.ok());
    CHECK(root->path == fs::path("/env/opcache-dir"));
    CHECK(root->source == "OPCACHE_DIR");
  }
  SUBCASE("an empty flag counts as unset") {
    auto root = resolve_cache_root(fs::path(), fake_env(k_everything));
    REQUIRE(root.ok());
    CHECK(root->path == fs::path("/env/opcache-dir"));
    CHECK(root->source == "OPCACHE_DIR");
  }
}

TEST_CASE("store::resolve_cache_root uses XDG_CACHE_HOME/opcache before HOME") {
  auto root = resolve_cache_root(std::nullopt, fake_env({{"XDG_CACHE_HOME", "/xdg"}, {"HOME", "/home/user"}}));
  REQUIRE(root.ok());
  CHECK(root->path == fs::path("/xdg/opcache"));
  CHECK(root->source == "XDG_CACHE_HOME");
}

TEST_CASE("store::resolve_cache_root falls back to HOME/.cache/opcache") {
  auto root = resolve_cache_root(std::nullopt, fake_env({{"HOME", "/home/user"}}));
  REQUIRE(root.ok());
  CHECK(root->path == fs::path("/home/user/.cache/opcache"));
  CHECK(root->source == "HOME");
}

TEST_CASE("store::resolve_cache_root ignores empty environment values") {
  SUBCASE("empty OPCACHE_DIR and XDG_CACHE_HOME fall through to HOME") {
    auto root = resolve_cache_root(std::nullopt,
                                   fake_env({{"OPCACHE_DIR", ""}, {"XDG_CACHE_HOME", ""}, {"HOME", "/home/user"}}));
    REQUIRE(root.ok());
    CHECK(root->path == fs::path("/home/user/.cache/opcache"));
    CHECK(root->source == "HOME");
  }
  SUBCASE("empty OPCACHE_DIR falls through to XDG_CACHE_HOME") {
    auto root = resolve_cache_root(std::nullopt, fake_env({{"OPCACHE_DIR", ""}, {"XDG_CACHE_HOME", "/xdg"}}));
    REQUIRE(root.ok());
    CHECK(root->path == fs::path("/xdg/opcache"));
    CHECK(root->source == "XDG_CACHE_HOME");
  }
  SUBCASE("all empty is the same as nothing set") {
    auto root = resolve_cache_root(std::nullopt,
                                   fake_env({{"OPCACHE_DIR", ""}, {"XDG_CACHE_HOME", ""}, {"HOME", ""}}));
    REQUIRE_FALSE(root.ok());
    CHECK(root.error().code() == opcache::ErrorCode::usage);
  }
}

TEST_CASE("store::resolve_cache_root without any setting is a usage error that says what to set") {
  auto root = resolve_cache_root(std::nullopt, fake_env({}));
  REQUIRE_FALSE(root.ok());
  CHECK(root.error().code() == opcache::ErrorCode::usage);
  CHECK(root.error().message().find("--cache-dir") != std::string::npos);
  CHECK(root.error().message().find("OPCACHE_DIR") != std::string::npos);
}

TEST_CASE("store::StoreLayout names its paths under the root and shards objects by two hex digits") {
  StoreLayout layout(fs::path("/cache"));
  CHECK(layout.root() == fs::path("/cache"));
  CHECK(layout.objects() == fs::path("/cache/objects"));
  CHECK(layout.index() == fs::path("/cache/index.db"));
  CHECK(layout.tmp() == fs::path("/cache/tmp"));
  CHECK(layout.locks() == fs::path("/cache/locks"));
  const std::string digest = "ab0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd";
  CHECK(layout.object_path(digest) == fs::path("/cache/objects/ab") / digest);
  const std::string other = "0f" + digest.substr(2);
  CHECK(layout.object_path(other) == fs::path("/cache/objects/0f") / other);
}

TEST_CASE("store::StoreLayout::create_directories creates root, objects, tmp and locks idempotently") {
  opcache::test::TempDir temp;
  StoreLayout layout(temp / "nested" / "cache");
  REQUIRE(layout.create_directories().ok());
  CHECK(fs::is_directory(layout.root()));
  CHECK(fs::is_directory(layout.objects()));
  CHECK(fs::is_directory(layout.tmp()));
  CHECK(fs::is_directory(layout.locks()));
  CHECK_FALSE(fs::exists(layout.index()));  // the index is created by Index::open, not here
  opcache::test::write_text(layout.tmp() / "keep.txt", "x");
  REQUIRE(layout.create_directories().ok());
  CHECK(opcache::test::read_text(layout.tmp() / "keep.txt") == "x");
}
