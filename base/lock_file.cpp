#include "base/lock_file.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "base/try.hpp"

namespace opcache::base {

Result<std::optional<LockFile>> LockFile::try_acquire(const std::filesystem::path& path) {
  for (;;) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      return errno_error("cannot open lock file", path, errno);
    }
    FileDescriptor owner(fd);
    // In a group-shared locks/ directory, teammates must be able to open it too.
    if (struct stat directory {}; ::stat(path.parent_path().c_str(), &directory) == 0) {
      OPCACHE_TRY(share_with_group_like(directory.st_mode, fd, path));
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK || errno == EINTR) {
        return std::optional<LockFile>();
      }
      return errno_error("cannot lock", path, errno);
    }
    // The holder before us may have unlinked the file after we opened it.
    struct stat by_fd {};
    struct stat by_path {};
    if (::fstat(fd, &by_fd) == 0 && ::stat(path.c_str(), &by_path) == 0 && by_fd.st_ino == by_path.st_ino &&
        by_fd.st_dev == by_path.st_dev) {
      return std::optional<LockFile>(LockFile(std::move(owner), path));
    }
  }
}

Result<LockFile> LockFile::acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout,
                                   std::chrono::milliseconds poll, bool* waited) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  if (waited != nullptr) {
    *waited = false;
  }
  for (;;) {
    OPCACHE_TRY_ASSIGN(auto lock, try_acquire(path));
    if (lock) {
      return std::move(*lock);
    }
    if (waited != nullptr) {
      *waited = true;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Error::timeout("waited " + std::to_string(timeout.count() / 1000) + " s for the lock " + path.string() +
                            " (another process is building the same kernel; raise --wait-timeout if builds take "
                            "longer)");
    }
    std::this_thread::sleep_for(poll);
  }
}

void LockFile::unlink_and_release() {
  if (m_fd.valid()) {
    ::unlink(m_path.c_str());
    m_fd.reset();
  }
}

}  // namespace opcache::base
