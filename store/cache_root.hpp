// Where a local store lives, and the names of the things inside it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "opcache/result.hpp"
#include "store/scenario.hpp"

namespace opcache::store {

namespace fs = std::filesystem;

/// A resolved cache root and which setting chose it (for `opcache config`).
struct CacheRoot {
  fs::path path;
  std::string source;  ///< "--cache-dir", "OPCACHE_DIR", "XDG_CACHE_HOME" or "HOME"
};

/// --cache-dir, else OPCACHE_DIR, else $XDG_CACHE_HOME/opcache, else
/// $HOME/.cache/opcache. Empty values count as unset. `usage` error when none
/// applies. The directory is not created here.
Result<CacheRoot> resolve_cache_root(const std::optional<fs::path>& flag, const EnvLookup& env);

/// The fixed layout under a cache root (docs/formats.md "Store layout").
class StoreLayout {
 public:
  explicit StoreLayout(fs::path root) : m_root(std::move(root)) {}

  const fs::path& root() const noexcept { return m_root; }
  fs::path objects() const { return m_root / "objects"; }
  fs::path index() const { return m_root / "index.db"; }
  fs::path tmp() const { return m_root / "tmp"; }
  fs::path locks() const { return m_root / "locks"; }
  /// objects/<first two hex digits>/<digest>
  fs::path object_path(const std::string& digest) const { return objects() / digest.substr(0, 2) / digest; }

  /// Creates root, objects/, tmp/ and locks/ if missing.
  Status create_directories() const;

 private:
  fs::path m_root;
};

}  // namespace opcache::store
