// Cache root resolution and the store layout (store/cache_root.hpp).
#include <doctest/doctest.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "store/cache_root.hpp"
#include "store/local_store.hpp"
#include "tests/support/kernels.hpp"
#include "tests/support/skip.hpp"
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

// --- File-system hardening: planted symlinks and foreign owners ---

namespace {

namespace store = opcache::store;
using opcache::test::read_text;
using opcache::test::TempDir;
using opcache::test::write_text;

constexpr unsigned k_nobody = 65534;

// A directory outside the cache holding a file whose bytes must never change.
struct Outside {
  fs::path dir;
  fs::path victim;
  explicit Outside(const TempDir& temp) : dir(temp / "outside"), victim(dir / "victim") {
    write_text(victim, "precious bytes\n");
  }
  // Nothing was added to, removed from or changed in the outside directory.
  void check_untouched() const {
    CHECK(read_text(victim) == "precious bytes\n");
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) {
      ++entries;
    }
    CHECK(entries == 1);
  }
};

unsigned mode_of(const fs::path& path) {
  struct stat info {};
  REQUIRE(::lstat(path.c_str(), &info) == 0);
  return info.st_mode & 07777;
}

store::BundleInput small_input(const fs::path& file) {
  store::BundleInput input;
  input.descriptor = nlohmann::json{{"op_type", "Add"}};
  input.scenario = store::scenario_to_json(*opcache::parse_scenario(opcache::test::k_test_scenario));
  input.members = {{"kernel.o", file, ""}};
  return input;
}

}  // namespace

TEST_CASE("store::StoreLayout::create_directories refuses a symlink planted as objects/, tmp/, locks/, outbox/ or "
          "remotes/") {
  for (const char* name : {"objects", "tmp", "locks", "outbox", "remotes"}) {
    CAPTURE(name);
    TempDir temp;
    Outside outside(temp);
    StoreLayout layout(temp / "cache");
    fs::create_directories(layout.root());
    fs::create_directory_symlink(outside.dir, layout.root() / name);
    auto status = layout.create_directories();
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().code() == opcache::ErrorCode::usage);
    CHECK(status.error().message().find((layout.root() / name).string() + " is a symlink") != std::string::npos);
    outside.check_untouched();
  }
}

TEST_CASE("store::LocalStore refuses to open an index.db, -wal or -shm symlink planted in the root") {
  for (const char* name : {"index.db", "index.db-wal", "index.db-shm"}) {
    CAPTURE(name);
    TempDir temp;
    Outside outside(temp);
    const auto root = temp / "cache";
    fs::create_directories(root);
    fs::create_symlink(outside.victim, root / name);
    store::StoreOptions options;
    options.root = root;
    auto opened = store::LocalStore::open(options);
    REQUIRE_FALSE(opened.ok());
    CHECK(opened.error().message().find((root / name).string() + " is a symlink") != std::string::npos);
    outside.check_untouched();
  }
}

TEST_CASE("store::StoreLayout::ensure_directory refuses a symlinked shard and paths outside the root") {
  TempDir temp;
  Outside outside(temp);
  StoreLayout layout(temp / "cache");
  REQUIRE(layout.create_directories().ok());
  fs::create_directory_symlink(outside.dir, layout.objects() / "ab");
  auto shard = layout.ensure_directory(layout.objects() / "ab");
  REQUIRE_FALSE(shard.ok());
  CHECK(shard.error().message().find((layout.objects() / "ab").string() + " is a symlink") != std::string::npos);
  CHECK_FALSE(layout.ensure_directory(temp / "elsewhere").ok());
  CHECK_FALSE(layout.ensure_directory(layout.objects() / ".." / ".." / "elsewhere").ok());
  CHECK_FALSE(fs::exists(temp / "elsewhere"));
  REQUIRE(layout.ensure_directory(layout.root() / "outbox" / "0123").ok());
  CHECK(fs::is_directory(layout.root() / "outbox" / "0123"));
  outside.check_untouched();
}

TEST_CASE("store::LocalStore publishes nothing through a symlink planted at an object shard") {
  TempDir temp;
  Outside outside(temp);
  write_text(temp / "kernel.o", "machine code");
  store::StoreOptions options;
  options.root = temp / "cache";
  auto local = store::LocalStore::open(options);
  REQUIRE(local.ok());
  // The key of this entry, from storing it once elsewhere. Its object's
  // digest covers the manifest's time, so a second later the shard differs:
  // every shard is a symlink here.
  store::StoreOptions probe_options;
  probe_options.root = temp / "probe";
  auto probe = store::LocalStore::open(probe_options);
  REQUIRE(probe.ok());
  auto probed = (*probe)->put(small_input(temp / "kernel.o"), opcache::ReplacePolicy::keep_existing);
  REQUIRE(probed.ok());
  static constexpr char k_hex[] = "0123456789abcdef";
  for (char high : std::string_view(k_hex)) {
    for (char low : std::string_view(k_hex)) {
      fs::create_directory_symlink(outside.dir, (*local)->layout().objects() / std::string{high, low});
    }
  }

  auto put = (*local)->put(small_input(temp / "kernel.o"), opcache::ReplacePolicy::keep_existing);
  REQUIRE_FALSE(put.ok());
  CHECK(put.error().message().find("is a symlink") != std::string::npos);
  outside.check_untouched();
  auto entry = (*local)->get(probed->key, temp / "out");
  REQUIRE(entry.ok());
  CHECK_FALSE(entry->has_value());
}

TEST_CASE("store::StoreLayout refuses a root another user owns and others may write, unless it is shared_group") {
  OPCACHE_SKIP_IF(::geteuid() != 0, "needs root to chown a directory to another user");
  TempDir temp;
  const auto root = temp / "team-cache";
  fs::create_directories(root);
  REQUIRE(::chown(root.c_str(), k_nobody, k_nobody) == 0);
  REQUIRE(::chmod(root.c_str(), 0777) == 0);

  auto refused = StoreLayout(root).create_directories();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code() == opcache::ErrorCode::usage);
  const auto& message = refused.error().message();
  CHECK(message.find("cache directory " + root.string() + " is owned by uid 65534") != std::string::npos);
  CHECK(message.find("mode 0777") != std::string::npos);
  CHECK(message.find("--shared-group") != std::string::npos);
  CHECK_FALSE(fs::exists(root / "objects"));

  SUBCASE("not writable by group or others: accepted") {
    REQUIRE(::chmod(root.c_str(), 0755) == 0);
    CHECK(StoreLayout(root).create_directories().ok());
  }
  SUBCASE("a foreign subdirectory that others may write is refused too") {
    REQUIRE(::chmod(root.c_str(), 0755) == 0);
    fs::create_directories(root / "tmp");
    REQUIRE(::chown((root / "tmp").c_str(), k_nobody, k_nobody) == 0);
    REQUIRE(::chmod((root / "tmp").c_str(), 0777) == 0);
    auto status = StoreLayout(root).create_directories();
    REQUIRE_FALSE(status.ok());
    CHECK(status.error().message().find("cache directory " + (root / "tmp").string() + " is owned by uid 65534") !=
          std::string::npos);
  }
  SUBCASE("with shared_group: accepted, and what opcache creates is group-writable") {
    write_text(temp / "kernel.o", "machine code");
    store::StoreOptions options;
    options.root = root;
    options.sharing = store::Sharing::group;
    auto local = store::LocalStore::open(options);
    REQUIRE_MESSAGE(local.ok(), (local.ok() ? "" : local.error().message()));
    for (const char* name : {"objects", "tmp", "locks"}) {
      CAPTURE(name);
      const auto mode = mode_of(root / name);
      CHECK((mode & S_ISGID) != 0);
      CHECK((mode & S_IWGRP) != 0);
    }
    CHECK((mode_of(root / "index.db") & (S_IRGRP | S_IWGRP)) == (S_IRGRP | S_IWGRP));
    auto put = (*local)->put(small_input(temp / "kernel.o"), opcache::ReplacePolicy::keep_existing);
    REQUIRE(put.ok());
    const auto object = (*local)->layout().object_path(put->digest);
    CHECK((mode_of(object) & S_IWGRP) != 0);
    CHECK((mode_of(object.parent_path()) & (S_ISGID | S_IWGRP)) == (S_ISGID | S_IWGRP));
  }
}

TEST_CASE("store::StoreLayout in a private root creates nothing group-writable") {
  TempDir temp;
  ::mode_t old = ::umask(022);
  StoreLayout layout(temp / "cache");
  auto status = layout.create_directories();
  ::umask(old);
  REQUIRE(status.ok());
  CHECK(mode_of(layout.tmp()) == 0755);
  CHECK_FALSE(fs::exists(layout.index()));
}

TEST_CASE("store::StoreLayout::object_path is objects/<first two hex digits>/<digest> below any root") {
  const std::string digest = "ab" + std::string(62, '3');
  for (const std::string root : {"/var/cache/opcache", "/var/cache/opcache/", "relative/root", "/", ""}) {
    INFO("root \"" << root << "\"");
    const StoreLayout layout{fs::path(root)};
    CHECK(layout.object_path(digest) == layout.objects() / "ab" / digest);
    CHECK(layout.object_path(digest).native() == (layout.objects() / "ab" / digest).native());
  }
}
