// Digests of files and directory trees, and a cache of them keyed by each
// file's identity on this machine, so that an unchanged file is not read
// again (ccache's compiler_check=content and its manifest's file stats).
// The identity (path, size, mtime, inode) only decides whether a remembered
// digest still holds; it is never part of a digest, because it differs
// between machines that hold the same bytes.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::base {

/// SHA-256, lowercase hex, of the contents of the regular file at `path`
/// (symlinks followed). `not_found` when missing, `io` otherwise.
Result<std::string> file_sha256(const std::filesystem::path& path);

/// Remembers digests of files in one directory of small files (one per
/// file digested, named by the SHA-256 of its path and method), each holding
/// the identity it was computed for, and in this process's memory (every
/// digest, whatever the file's size). Lookups and stores are atomic renames,
/// so processes may share the directory; an entry that is unreadable or
/// stale is recomputed and replaced, and a store that fails is ignored (the
/// digest is still returned). The entries are a cache, written without
/// fsync: one lost to a power cut is computed again. Thread-safe; cheap to
/// copy, and copies share what they remember in memory.
class DigestCache {
 public:
  /// Computes a digest of a file; called only when no entry holds.
  using Compute = std::function<Result<std::string>(const std::filesystem::path&)>;

  /// A cache in `directory` (created on first store). An empty path means no
  /// caching: every call computes.
  explicit DigestCache(std::filesystem::path directory = {});

  /// The digest of the file at `path` by `method` (a name for what `compute`
  /// computes, e.g. "sha256"): the remembered one when the file's identity is
  /// unchanged since it was computed, else `compute(path)`, remembered unless
  /// the file changed within kTooNewNs of now or while it was computed.
  /// Errors of `compute` and of stat(2) on `path` are returned as they are.
  Result<std::string> digest(const std::filesystem::path& path, std::string_view method, const Compute& compute) const;

  /// `digest(path, "sha256", file_sha256)`, except that a file under
  /// `kRememberedFrom` bytes is remembered in memory only: reading a few
  /// kilobytes costs less than looking up its entry, and far less than
  /// creating one (an inode per file).
  Result<std::string> file_sha256(const std::filesystem::path& path) const;

  /// The size from which `file_sha256` remembers a file's digest.
  static constexpr std::uintmax_t kRememberedFrom = 64 * 1024;

  /// A file whose change time is less than this before the moment it is
  /// digested is not remembered (ccache's "too new" rule): a second change
  /// within the file system's timestamp granularity could leave its identity
  /// as it was. Generous against the kernel's coarse clock (a few ms).
  static constexpr std::int64_t kTooNewNs = 100'000'000;

  /// Whether a file whose change time (ctime, which no one can set back) is
  /// `ctime_ns` since the epoch changed at least kTooNewNs ago, so that a
  /// digest taken now may be remembered by its identity. False when the
  /// clock cannot be read.
  static bool settled(std::int64_t ctime_ns);

 private:
  struct Memory;

  /// digest(), with entries on disk only for files of `on_disk_from` bytes or more.
  Result<std::string> lookup(const std::filesystem::path& path, std::string_view method, const Compute& compute,
                             std::uintmax_t on_disk_from) const;

  std::filesystem::path m_directory;
  std::shared_ptr<Memory> m_memory;  ///< null without a directory
};

/// SHA-256 of a directory tree, lowercase hex: over each regular file below
/// `directory` (symlinks to files followed, symlinked directories not
/// entered), sorted by relative path, the line "<relative path>\t<SHA-256 of
/// its contents>\n". Neither the directory's own path nor any timestamp
/// enters, so the same tree at another path has the same digest. Files for
/// which `skip` returns true are left out. File digests come from `cache`.
Result<std::string> tree_sha256(const std::filesystem::path& directory, const DigestCache& cache,
                                const std::function<bool(const std::filesystem::path&)>& skip = {});

}  // namespace opcache::base
