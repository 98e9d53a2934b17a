#include "base/safe_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <vector>

#include "base/try.hpp"

namespace opcache::base {

namespace {

constexpr int k_directory_flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;

bool is_single_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

}  // namespace

Result<SafeDirectory> SafeDirectory::from_fd(int fd, std::filesystem::path display) {
  FileDescriptor owner(fd);
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return errno_error("cannot stat directory", display, errno);
  }
  return SafeDirectory(std::move(owner), std::move(display), info.st_uid, info.st_mode & 07777);
}

Result<SafeDirectory> SafeDirectory::open_root(const std::filesystem::path& root, bool create) {
  if (create) {
    OPCACHE_TRY(ensure_directory(root));
  }
  int fd = ::open(root.c_str(), k_directory_flags);
  if (fd < 0) {
    return errno_error("cannot open directory", root, errno);
  }
  return from_fd(fd, root);
}

namespace {

// Refuses what `info` (fstatat of `name` in the directory reached by
// `parent`, not followed) says is not a directory to work in.
Status check_child_kind(const struct stat& info, const std::filesystem::path& parent, const std::string& name) {
  if (S_ISLNK(info.st_mode)) {
    return Error::usage((parent / name).string() +
                        " is a symlink; refusing to follow it (remove it or choose another directory)");
  }
  if (!S_ISDIR(info.st_mode)) {
    return Error::usage((parent / name).string() + " exists and is not a directory");
  }
  return {};
}

}  // namespace

Result<SafeDirectory> SafeDirectory::child(const std::string& name, bool create) const {
  const auto display = m_display / name;
  if (!is_single_name(name)) {
    return Error::usage("\"" + name + "\" is not a single directory name");
  }
  bool created = false;
  struct stat info {};
  if (::fstatat(m_fd.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
    OPCACHE_TRY(check_child_kind(info, m_display, name));
  } else if (errno == ENOENT && create) {
    if (::mkdirat(m_fd.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
      return errno_error("cannot create directory", display, errno);
    }
    created = true;
  } else {
    return errno_error("cannot open directory", display, errno);
  }
  // O_NOFOLLOW: a symlink swapped in since the check is refused (ELOOP), not followed.
  int fd = ::openat(m_fd.get(), name.c_str(), k_directory_flags | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      return Error::usage(display.string() + " is a symlink or not a directory; refusing to follow it");
    }
    return errno_error("cannot open directory", display, errno);
  }
  if (created) {
    OPCACHE_TRY(share_with_group_like(m_mode, fd, display));
  }
  return from_fd(fd, display);
}

Result<std::optional<DirectoryStatus>> SafeDirectory::child_status(const std::string& name) const {
  if (!is_single_name(name)) {
    return Error::usage("\"" + name + "\" is not a single directory name");
  }
  struct stat info {};
  if (::fstatat(m_fd.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) {
      return std::optional<DirectoryStatus>();
    }
    return errno_error("cannot open directory", m_display / name, errno);
  }
  OPCACHE_TRY(check_child_kind(info, m_display, name));
  return std::optional<DirectoryStatus>(DirectoryStatus{info.st_uid, info.st_mode & 07777u});
}

Result<SafeDirectory> SafeDirectory::descend(const std::filesystem::path& relative, bool create) const {
  OPCACHE_TRY_ASSIGN(SafeDirectory current, child(relative.begin()->string(), create));
  for (auto it = std::next(relative.begin()); it != relative.end(); ++it) {
    OPCACHE_TRY_ASSIGN(current, current.child(it->string(), create));
  }
  return current;
}

std::filesystem::path SafeDirectory::fd_path() const {
  return std::filesystem::path("/proc/self/fd") / std::to_string(m_fd.get());
}

Status SafeDirectory::copy_file_from(const SafeDirectory& source, const std::string& source_name,
                                     const std::string& temp) const {
  int in = ::openat(source.fd(), source_name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) {
    return errno_error("cannot open", source.display_path() / source_name, errno);
  }
  FileDescriptor input(in);
  int out = ::openat(m_fd.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    return errno_error("cannot create", m_display / temp, errno);
  }
  FileDescriptor output(out);
  char buffer[1 << 16];
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t n, read_some(in, buffer, sizeof buffer, source.display_path() / source_name));
    if (n == 0) {
      return {};
    }
    OPCACHE_TRY(write_all(out, buffer, n, m_display / temp));
  }
}

Status SafeDirectory::link_or_copy_from(const SafeDirectory& source, const std::string& source_name,
                                        const std::string& name) const {
  const std::string temp = ".opcache-" + random_token() + ".tmp";
  if (::linkat(source.fd(), source_name.c_str(), m_fd.get(), temp.c_str(), 0) != 0) {
    if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP) {
      return errno_error("cannot link " + (source.display_path() / source_name).string() + " to", m_display / name,
                         errno);
    }
    if (auto copied = copy_file_from(source, source_name, temp); !copied) {
      ::unlinkat(m_fd.get(), temp.c_str(), 0);
      return copied;
    }
  }
  if (::renameat(m_fd.get(), temp.c_str(), m_fd.get(), name.c_str()) != 0) {
    int error = errno;
    ::unlinkat(m_fd.get(), temp.c_str(), 0);
    return errno_error("cannot rename into place", m_display / name, error);
  }
  return {};
}

Result<bool> SafeDirectory::rename_if_absent(const std::string& name, const SafeDirectory& target,
                                             const std::string& new_name) const {
  if (!is_single_name(name) || !is_single_name(new_name)) {
    return Error::usage("\"" + name + "\" or \"" + new_name + "\" is not a single file name");
  }
  if (::renameat2(m_fd.get(), name.c_str(), target.fd(), new_name.c_str(), RENAME_NOREPLACE) == 0) {
    return true;
  }
  if (errno == EEXIST) {
    return false;
  }
  const int error = errno;
  const auto from = (m_display / name).string();
  const auto to = target.display_path() / new_name;
  if (error == EINVAL) {
    return Error::io("cannot rename " + from + " to " + to.string() +
                     " without replacing what may be there: its file system does not support RENAME_NOREPLACE"
                     " (NFS, some FUSE file systems); choose a directory on a local file system");
  }
  return errno_error("cannot rename " + from + " to", to, error);
}

Status SafeDirectory::remove_tree(const std::string& name) const {
  if (!is_single_name(name)) {
    return Error::usage("\"" + name + "\" is not a single file name");
  }
  // unlinkat refuses a directory with EISDIR; a symlink to one is unlinked itself.
  if (::unlinkat(m_fd.get(), name.c_str(), 0) == 0 || errno == ENOENT) {
    return {};
  }
  if (errno != EISDIR) {
    return errno_error("cannot remove", m_display / name, errno);
  }
  OPCACHE_TRY_ASSIGN(SafeDirectory directory, child(name, /*create=*/false));
  std::error_code ec;
  std::vector<std::string> names;
  for (const auto& item : std::filesystem::directory_iterator(directory.fd_path(), ec)) {
    names.push_back(item.path().filename().string());
  }
  if (ec) {
    return errno_error("cannot list", directory.display_path(), ec.value());
  }
  for (const auto& entry : names) {
    OPCACHE_TRY(directory.remove_tree(entry));
  }
  if (::unlinkat(m_fd.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return errno_error("cannot remove directory", m_display / name, errno);
  }
  return {};
}

Status ensure_directory_beneath(const std::filesystem::path& root, const std::filesystem::path& relative) {
  OPCACHE_TRY_ASSIGN(auto top, SafeDirectory::open_root(root.empty() ? "." : root, /*create=*/true));
  if (relative.empty()) {
    return {};
  }
  OPCACHE_TRY(top.descend(relative, /*create=*/true));
  return {};
}

}  // namespace opcache::base
