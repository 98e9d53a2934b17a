// Writing into a directory tree that may contain planted symlinks: every
// directory is opened relative to its parent with O_NOFOLLOW, and files are
// replaced atomically (temp + renameat), so nothing is ever written outside
// the root and no symlink inside it is ever followed.
#pragma once

#include <filesystem>
#include <string>

#include "opcache/result.hpp"
#include "base/file_io.hpp"

namespace opcache::layouts {

/// An open directory. Move-only.
class SafeDirectory {
 public:
  /// Opens (creating with `create`) the root. The root path itself is the
  /// caller's choice and may be reached through symlinks; nothing below it is.
  static Result<SafeDirectory> open_root(const std::filesystem::path& root, bool create);

  /// Opens (creating with `create`) the child directory `name` (one path
  /// component). A symlink or a non-directory there is a `usage` error naming it.
  Result<SafeDirectory> child(const std::string& name, bool create) const;

  /// A path that names this very directory without re-resolving its path
  /// ("/proc/self/fd/N"), for APIs that take paths. Valid while this object lives.
  std::filesystem::path fd_path() const;

  /// For messages: the path this directory was reached by.
  const std::filesystem::path& display_path() const noexcept { return m_display; }

  /// Makes `name` here a hard link to `source_name` in `source` (same
  /// content, no copy), replacing `name` atomically; copies when the file
  /// system cannot link. A symlink at `name` is replaced, never followed.
  Status link_or_copy_from(const SafeDirectory& source, const std::string& source_name, const std::string& name) const;

  int fd() const noexcept { return m_fd.get(); }

 private:
  SafeDirectory(base::FileDescriptor fd, std::filesystem::path display)
      : m_fd(std::move(fd)), m_display(std::move(display)) {}
  Status copy_file_from(const SafeDirectory& source, const std::string& source_name, const std::string& temp) const;

  base::FileDescriptor m_fd;
  std::filesystem::path m_display;
};

}  // namespace opcache::layouts
