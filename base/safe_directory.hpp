// Walking and writing a directory tree that may contain planted symlinks:
// every directory below a root is opened relative to its parent with
// O_NOFOLLOW, and files are replaced atomically (temp + renameat), so nothing
// is ever written outside the root and no symlink inside it is ever followed.
// Used for the cache root's subdirectories (store/cache_root), the breaker
// files (remote/circuit_breaker) and export targets (layouts/export).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "opcache/result.hpp"
#include "base/file_io.hpp"

namespace opcache::base {

/// Owner and permission bits (with setgid/sticky) of a directory.
struct DirectoryStatus {
  unsigned owner = 0;
  unsigned mode = 0;
};

/// An open directory and the owner and mode it had when opened. Move-only.
class SafeDirectory {
 public:
  /// Opens (creating with `create`, parents included) the root. The root
  /// path itself is the caller's choice and may be reached through symlinks;
  /// nothing below it is.
  static Result<SafeDirectory> open_root(const std::filesystem::path& root, bool create);

  /// Opens (creating with `create`) the child directory `name` (one path
  /// component). A symlink or a non-directory there is a `usage` error naming
  /// it; `not_found` when it is missing and `create` is false. A directory it
  /// creates in a group-shared directory (see is_group_shared_mode) is
  /// group-writable and setgid too.
  Result<SafeDirectory> child(const std::string& name, bool create) const;

  /// What child() would check of the child directory `name`, by its status
  /// alone (fstatat, not followed), without opening it: owner and
  /// permission bits as owner() and mode() give them, or std::nullopt when
  /// nothing is there. A symlink or a non-directory is a `usage` error as
  /// in child(). For callers that only check a directory (a store's
  /// opening), not work in it.
  Result<std::optional<DirectoryStatus>> child_status(const std::string& name) const;

  /// Opens `relative` (components below this directory, none of them "..")
  /// one child() at a time; the same errors.
  Result<SafeDirectory> descend(const std::filesystem::path& relative, bool create) const;

  /// A path that names this very directory without re-resolving its path
  /// ("/proc/self/fd/N"), for APIs that take paths. Valid while this object lives.
  std::filesystem::path fd_path() const;

  /// For messages: the path this directory was reached by.
  const std::filesystem::path& display_path() const noexcept { return m_display; }

  /// Owner and permission bits (with setgid/sticky) when it was opened.
  unsigned owner() const noexcept { return m_owner; }
  unsigned mode() const noexcept { return m_mode; }

  /// Makes `name` here a hard link to `source_name` in `source` (same
  /// content, no copy), replacing `name` atomically; copies when the file
  /// system cannot link. A symlink at `name` is replaced, never followed.
  Status link_or_copy_from(const SafeDirectory& source, const std::string& source_name, const std::string& name) const;

  /// Renames `name` here to `new_name` in `target` (the same file system)
  /// unless something — a file, a directory, a symlink — is at `new_name`
  /// already: then nothing changes and the result is false. Neither name is
  /// followed if it is a symlink; a directory moves with its contents, so
  /// readers see all of it at once or nothing. `io` error for other failures,
  /// including a file system that cannot rename without replacing
  /// (RENAME_NOREPLACE: NFS, some FUSE file systems).
  Result<bool> rename_if_absent(const std::string& name, const SafeDirectory& target,
                                const std::string& new_name) const;

  /// Removes `name` here and, when it is a directory, everything below it,
  /// following no symlink (a symlink is removed, never its target). Absent
  /// is not an error. For directories this process made, such as staging
  /// directories: another process writing into the tree meanwhile can make
  /// it fail with an `io` error.
  Status remove_tree(const std::string& name) const;

  int fd() const noexcept { return m_fd.get(); }

 private:
  SafeDirectory(FileDescriptor fd, std::filesystem::path display, unsigned owner, unsigned mode)
      : m_fd(std::move(fd)), m_display(std::move(display)), m_owner(owner), m_mode(mode) {}
  static Result<SafeDirectory> from_fd(int fd, std::filesystem::path display);
  Status copy_file_from(const SafeDirectory& source, const std::string& source_name, const std::string& temp) const;

  FileDescriptor m_fd;
  std::filesystem::path m_display;
  unsigned m_owner = 0;
  unsigned m_mode = 0;
};

/// Creates `root / relative` where needed and checks it: `root` may be
/// reached through symlinks, nothing in `relative` may be one (see
/// SafeDirectory::descend).
Status ensure_directory_beneath(const std::filesystem::path& root, const std::filesystem::path& relative);

}  // namespace opcache::base
