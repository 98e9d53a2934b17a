// Where a local store lives, and the names of the things inside it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "base/safe_directory.hpp"
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

/// Who besides its owner may write in a cache root (setting shared_group).
enum class Sharing {
  /// A root or subdirectory owned by another user and writable by group or
  /// others is refused, as ssh's StrictModes refuses such a ~/.ssh.
  owner,
  /// A team shares the root through its group: such directories are
  /// accepted, and the root, its subdirectories and the files opcache creates
  /// in them are made group-writable (directories setgid, so the group sticks).
  group,
};

/// The fixed layout under a cache root (docs/formats.md "Store layout").
/// Every directory below the root is reached without following symlinks
/// (base/safe_directory); the root itself may be reached through one.
class StoreLayout {
 public:
  explicit StoreLayout(fs::path root, Sharing sharing = Sharing::owner)
      : m_root(std::move(root)), m_sharing(sharing) {}

  const fs::path& root() const noexcept { return m_root; }
  Sharing sharing() const noexcept { return m_sharing; }
  fs::path objects() const { return m_root / "objects"; }
  fs::path index() const { return m_root / "index.db"; }
  fs::path tmp() const { return m_root / "tmp"; }
  fs::path locks() const { return m_root / "locks"; }
  /// keys/<first two hex digits>/<key>: key records (store/key_table.hpp)
  fs::path keys() const { return m_root / "keys"; }
  /// hits.journal: hits not yet folded into the index (store/hit_journal.hpp)
  fs::path hit_journal() const { return m_root / "hits.journal"; }
  /// revocations/<key>.json: tombstones of revoked keys (store/revocation.hpp)
  fs::path revocations() const { return m_root / "revocations"; }
  /// manifests/<first two hex digits>/<command key>.json: exec manifests (store/exec_manifest_file.hpp)
  fs::path manifests() const { return m_root / "manifests"; }
  /// objects/<first two hex digits>/<digest>
  /// (one path made from one string: a hit names an object on every lookup)
  fs::path object_path(const std::string& digest) const;

  /// Creates root, objects/, tmp/ and locks/ if missing and checks the
  /// root, those and outbox/, remotes/, digests/, revocations/ and keys/ (when present): each must be a real
  /// directory (not a symlink) passing the Sharing rule, and index.db, its
  /// -wal and -shm files and hits.journal must not be symlinks. `usage` error naming the path
  /// otherwise; nothing is written then. With Sharing::group the directories
  /// this process owns are made group-writable and setgid, and index.db is
  /// created group-writable (SQLite gives its -wal and -shm the same mode).
  /// Process-safe; idempotent.
  Status create_directories() const;

  /// Creates `directory`, which must lie below the root (e.g. objects/ab,
  /// outbox/<id>), component by component without following a symlink, each
  /// component checked like create_directories() checks the subdirectories.
  /// `usage` error for a path outside the root, a symlink or a refused owner.
  Status ensure_directory(const fs::path& directory) const;

 private:
  fs::path m_root;
  Sharing m_sharing;
};

}  // namespace opcache::store
