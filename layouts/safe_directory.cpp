#include "layouts/safe_directory.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/try.hpp"

namespace opcache::layouts {

namespace {

constexpr int k_directory_flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;

}  // namespace

Result<SafeDirectory> SafeDirectory::open_root(const std::filesystem::path& root, bool create) {
  if (create) {
    OPCACHE_TRY(base::ensure_directory(root));
  }
  int fd = ::open(root.c_str(), k_directory_flags);
  if (fd < 0) {
    return base::errno_error("cannot open directory", root, errno);
  }
  return SafeDirectory(base::FileDescriptor(fd), root);
}

Result<SafeDirectory> SafeDirectory::child(const std::string& name, bool create) const {
  const auto display = m_display / name;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos) {
    return Error::usage("\"" + name + "\" is not a single directory name");
  }
  struct stat info {};
  if (::fstatat(m_fd.get(), name.c_str(), &info, AT_SYMLINK_NOFOLLOW) == 0) {
    if (S_ISLNK(info.st_mode)) {
      return Error::usage(display.string() + " is a symlink; refusing to follow it (remove it or choose another "
                                             "directory)");
    }
    if (!S_ISDIR(info.st_mode)) {
      return Error::usage(display.string() + " exists and is not a directory");
    }
  } else if (errno == ENOENT && create) {
    if (::mkdirat(m_fd.get(), name.c_str(), 0755) != 0 && errno != EEXIST) {
      return base::errno_error("cannot create directory", display, errno);
    }
  } else {
    return base::errno_error("cannot open directory", display, errno);
  }
  int fd = ::openat(m_fd.get(), name.c_str(), k_directory_flags | O_NOFOLLOW);
  if (fd < 0) {
    return base::errno_error("cannot open directory", display, errno);
  }
  return SafeDirectory(base::FileDescriptor(fd), display);
}

std::filesystem::path SafeDirectory::fd_path() const {
  return std::filesystem::path("/proc/self/fd") / std::to_string(m_fd.get());
}

Status SafeDirectory::copy_file_from(const SafeDirectory& source, const std::string& source_name,
                                     const std::string& temp) const {
  int in = ::openat(source.fd(), source_name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) {
    return base::errno_error("cannot open", source.display_path() / source_name, errno);
  }
  base::FileDescriptor input(in);
  int out = ::openat(m_fd.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (out < 0) {
    return base::errno_error("cannot create", m_display / temp, errno);
  }
  base::FileDescriptor output(out);
  char buffer[1 << 16];
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t n, base::read_some(in, buffer, sizeof buffer, source.display_path() / source_name));
    if (n == 0) {
      return {};
    }
    OPCACHE_TRY(base::write_all(out, buffer, n, m_display / temp));
  }
}

Status SafeDirectory::link_or_copy_from(const SafeDirectory& source, const std::string& source_name,
                                        const std::string& name) const {
  const std::string temp = ".opcache-" + base::random_token() + ".tmp";
  if (::linkat(source.fd(), source_name.c_str(), m_fd.get(), temp.c_str(), 0) != 0) {
    if (errno != EXDEV && errno != EPERM && errno != EMLINK && errno != ENOTSUP) {
      return base::errno_error("cannot link " + (source.display_path() / source_name).string() + " to",
                                m_display / name, errno);
    }
    if (auto copied = copy_file_from(source, source_name, temp); !copied) {
      ::unlinkat(m_fd.get(), temp.c_str(), 0);
      return copied;
    }
  }
  if (::renameat(m_fd.get(), temp.c_str(), m_fd.get(), name.c_str()) != 0) {
    int error = errno;
    ::unlinkat(m_fd.get(), temp.c_str(), 0);
    return base::errno_error("cannot rename into place", m_display / name, error);
  }
  return {};
}

}  // namespace opcache::layouts
