#include "base/file_io.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>

#include "base/try.hpp"

namespace opcache::base {

Error errno_error(const std::string& what, const fs::path& path, int error_number) {
  std::string message = what + " " + path.string() + ": " + std::strerror(error_number);
  return error_number == ENOENT ? Error::not_found(std::move(message)) : Error::io(std::move(message));
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    reset();
    m_fd = other.release();
  }
  return *this;
}

FileDescriptor::~FileDescriptor() { reset(); }

int FileDescriptor::release() noexcept {
  int fd = m_fd;
  m_fd = -1;
  return fd;
}

void FileDescriptor::reset() noexcept {
  if (m_fd >= 0) {
    ::close(m_fd);
    m_fd = -1;
  }
}

Result<FileDescriptor> open_for_reading(const fs::path& path, bool follow_symlinks) {
  int flags = O_RDONLY | O_CLOEXEC | (follow_symlinks ? 0 : O_NOFOLLOW);
  int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    return errno_error("cannot open", path, errno);
  }
  return FileDescriptor(fd);
}

Result<std::size_t> read_some(int fd, void* buffer, std::size_t size, const fs::path& path_for_errors) {
  for (;;) {
    ssize_t n = ::read(fd, buffer, size);
    if (n >= 0) {
      return static_cast<std::size_t>(n);
    }
    if (errno != EINTR) {
      return errno_error("cannot read", path_for_errors, errno);
    }
  }
}

Result<std::size_t> read_up_to(int fd, void* buffer, std::size_t size, const fs::path& path_for_errors) {
  auto* bytes = static_cast<char*>(buffer);
  std::size_t have = 0;
  while (have < size) {
    OPCACHE_TRY_ASSIGN(std::size_t n, read_some(fd, bytes + have, size - have, path_for_errors));
    if (n == 0) {
      break;
    }
    have += n;
  }
  return have;
}

Status write_all(int fd, const void* data, std::size_t size, const fs::path& path_for_errors) {
  const auto* bytes = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, bytes, size);
    if (n < 0) {
      if (errno == EINTR) {
        continue;
      }
      return errno_error("cannot write", path_for_errors, errno);
    }
    bytes += n;
    size -= static_cast<std::size_t>(n);
  }
  return {};
}

Result<std::string> read_file(const fs::path& path) {
  OPCACHE_TRY_ASSIGN(FileDescriptor fd, open_for_reading(path));
  // Read straight into the string, sized by the file (one byte more, to see
  // its end in one read): through a 64 KiB buffer on the stack, a hit process
  // reading its 300-byte descriptor faulted in stack pages it never needed.
  struct stat info {};
  const bool regular = ::fstat(fd.get(), &info) == 0 && S_ISREG(info.st_mode);
  std::string contents(regular ? static_cast<std::size_t>(info.st_size) + 1 : 4096, '\0');
  std::size_t have = 0;
  for (;;) {
    if (have == contents.size()) {
      contents.resize(2 * contents.size());  // a file that grew, or not a regular file
    }
    OPCACHE_TRY_ASSIGN(std::size_t n, read_some(fd.get(), contents.data() + have, contents.size() - have, path));
    if (n == 0) {
      break;
    }
    have += n;
  }
  contents.resize(have);
  return contents;
}

Result<std::string> read_small_file(const fs::path& path, std::size_t max_bytes) {
  // O_NONBLOCK: a FIFO planted there must not block the open.
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK));
  if (!fd.valid()) {
    return errno_error("cannot open", path, errno);
  }
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0 || !S_ISREG(info.st_mode)) {
    return Error::io(path.string() + " is not a regular file");
  }
  // Sized by the file, not by the bound: zeroing 64 KiB for a 200-byte
  // record cost a hit process 16 page faults. One byte more than the size,
  // to see a file that grew; then on to the bound.
  std::string contents(std::min(static_cast<std::size_t>(info.st_size), max_bytes) + 1, '\0');
  OPCACHE_TRY_ASSIGN(std::size_t n, read_up_to(fd.get(), contents.data(), contents.size(), path));
  while (n == contents.size() && n <= max_bytes) {
    contents.resize(std::min(2 * contents.size(), max_bytes + 1));
    OPCACHE_TRY_ASSIGN(std::size_t more, read_up_to(fd.get(), contents.data() + n, contents.size() - n, path));
    n += more;
    if (more == 0) {
      break;
    }
  }
  if (n > max_bytes) {
    return Error::corrupt(path.string() + " is larger than " + std::to_string(max_bytes) + " bytes");
  }
  contents.resize(n);
  return contents;
}

Status write_file_atomic(const fs::path& path, std::string_view contents, Durability durability) {
  fs::path directory = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  OPCACHE_TRY_ASSIGN(AtomicFile file, AtomicFile::create(directory));
  OPCACHE_TRY(file.write(contents.data(), contents.size()));
  return file.commit(path, durability);
}

Status fsync_directory(const fs::path& directory) {
  int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return errno_error("cannot open directory", directory, errno);
  }
  FileDescriptor owner(fd);
  if (::fsync(fd) != 0 && errno != EINVAL) {
    return errno_error("cannot fsync directory", directory, errno);
  }
  return {};
}

Status ensure_directory(const fs::path& directory) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  if (ec) {
    return Error::io("cannot create directory " + directory.string() + ": " + ec.message());
  }
  return {};
}

bool is_group_shared_mode(unsigned mode) noexcept {
  return (mode & S_ISGID) != 0 && (mode & S_IWGRP) != 0;
}

Status share_with_group_like(unsigned directory_mode, int fd, const fs::path& path) {
  if (!is_group_shared_mode(directory_mode)) {
    return {};
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    return errno_error("cannot stat", path, errno);
  }
  if (info.st_uid != ::geteuid()) {
    return {};
  }
  mode_t wanted = (info.st_mode & 07777) | S_IRGRP | S_IWGRP;
  if (S_ISDIR(info.st_mode)) {
    wanted |= S_IXGRP | S_ISGID;
  }
  if (wanted != (info.st_mode & 07777) && ::fchmod(fd, wanted) != 0) {
    return errno_error("cannot make group-writable", path, errno);
  }
  return {};
}

std::string random_token() {
  // Seeded by getrandom(2), not std::random_device: that one asks the CPU for
  // RDRAND with CPUID first, and under a hypervisor a CPUID costs a trap
  // (6 µs here), paid by every hit that writes a file.
  static thread_local std::mt19937_64 generator{[] {
    std::uint64_t seed = 0;
    if (::getrandom(&seed, sizeof seed, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof seed)) {
      seed = static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    }
    return seed ^ (static_cast<std::uint64_t>(::getpid()) << 16);
  }()};
  static constexpr char k_digits[] = "0123456789abcdef";
  std::uint64_t value = generator();
  std::string token(16, '0');
  for (char& c : token) {
    c = k_digits[value & 0xf];
    value >>= 4;
  }
  return token;
}

Result<AtomicFile> AtomicFile::create(const fs::path& temp_directory) {
  int directory_fd = ::open(temp_directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0) {
    return errno_error("cannot open directory", temp_directory, errno);
  }
  FileDescriptor directory(directory_fd);
  struct stat directory_info {};
  if (::fstat(directory_fd, &directory_info) != 0) {
    return errno_error("cannot stat directory", temp_directory, errno);
  }
  for (int attempt = 0; attempt < 8; ++attempt) {
    std::string name = std::to_string(::getpid()) + "-" + random_token() + ".tmp";
    fs::path path = temp_directory / name;
    int fd = ::openat(directory_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd >= 0) {
      AtomicFile file(std::move(directory), FileDescriptor(fd), std::move(path));
      OPCACHE_TRY(share_with_group_like(directory_info.st_mode, file.fd(), file.temp_path()));
      return file;
    }
    if (errno != EEXIST) {
      return errno_error("cannot create temporary file", path, errno);
    }
  }
  return Error::io("cannot create a unique temporary file in " + temp_directory.string());
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : m_directory(std::move(other.m_directory)),
      m_fd(std::move(other.m_fd)),
      m_temp_path(std::move(other.m_temp_path)),
      m_done(other.m_done),
      m_closed(other.m_closed) {
  other.m_done = true;
}

AtomicFile::~AtomicFile() {
  if (!m_done) {
    m_fd.reset();
    ::unlinkat(m_directory.get(), temp_name().c_str(), 0);
  }
}

Status AtomicFile::finish_writing(Durability durability) {
  if (m_closed) {
    return {};
  }
  if (durability == Durability::synced && ::fsync(m_fd.get()) != 0) {
    return errno_error("cannot fsync", m_temp_path, errno);
  }
  if (::close(m_fd.release()) != 0) {
    return errno_error("cannot close", m_temp_path, errno);
  }
  m_closed = true;
  return {};
}

Status AtomicFile::commit(const fs::path& target, Durability durability) {
  OPCACHE_TRY(finish_writing(durability));
  if (::renameat(m_directory.get(), temp_name().c_str(), AT_FDCWD, target.c_str()) != 0) {
    return errno_error("cannot rename " + m_temp_path.string() + " to", target, errno);
  }
  m_done = true;
  if (durability == Durability::deferred) {
    return {};
  }
  fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  return fsync_directory(directory);
}

Result<bool> AtomicFile::link_if_absent(const fs::path& target, Durability durability) {
  OPCACHE_TRY(finish_writing(durability));
  if (::linkat(m_directory.get(), temp_name().c_str(), AT_FDCWD, target.c_str(), 0) != 0) {
    if (errno == EEXIST) {
      return false;
    }
    return errno_error("cannot link " + m_temp_path.string() + " to", target, errno);
  }
  if (durability == Durability::deferred) {
    return true;
  }
  fs::path directory = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  OPCACHE_TRY(fsync_directory(directory));
  return true;
}

long temp_file_owner_pid(const std::string& file_name) {
  auto dash = file_name.find('-');
  if (dash == std::string::npos || dash == 0 || file_name.size() < 4 ||
      file_name.compare(file_name.size() - 4, 4, ".tmp") != 0) {
    return 0;
  }
  long pid = 0;
  for (std::size_t i = 0; i < dash; ++i) {
    if (file_name[i] < '0' || file_name[i] > '9' || pid > 100000000) {
      return 0;
    }
    pid = pid * 10 + (file_name[i] - '0');
  }
  return pid;
}

bool process_alive(long pid) {
  return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

}  // namespace opcache::base
