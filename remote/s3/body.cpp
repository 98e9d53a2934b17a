#include "remote/s3/body.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "base/try.hpp"

namespace opcache::remote {

namespace fs = std::filesystem;

BodySource BodySource::from_memory(std::string_view data) { return BodySource(data); }

Result<BodySource> BodySource::from_file(const fs::path& path) {
  OPCACHE_TRY_ASSIGN(base::FileDescriptor fd, base::open_for_reading(path));
  struct stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return base::errno_error("cannot stat", path, errno);
  }
  if (!S_ISREG(info.st_mode)) {
    return Error::usage("cannot upload " + path.string() + ": not a regular file");
  }
  return BodySource(std::move(fd), path, static_cast<std::int64_t>(info.st_size));
}

Result<std::size_t> BodySource::read(char* buffer, std::size_t capacity) {
  const auto wanted = static_cast<std::size_t>(std::min<std::int64_t>(static_cast<std::int64_t>(capacity),
                                                                      m_size - m_offset));
  if (wanted == 0) {
    return std::size_t{0};
  }
  if (!m_fd.valid()) {
    std::copy_n(m_memory.data() + m_offset, wanted, buffer);
    m_offset += static_cast<std::int64_t>(wanted);
    return wanted;
  }
  ssize_t got = -1;
  do {
    got = ::pread(m_fd.get(), buffer, wanted, m_offset);
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    return base::errno_error("cannot read", m_path, errno);
  }
  if (got == 0) {
    return Error::io("file " + m_path.string() + " shrank while it was being uploaded");
  }
  m_offset += got;
  return static_cast<std::size_t>(got);
}

Status BodySource::check_unchanged() const {
  struct stat info {};
  if (m_fd.valid() && (::fstat(m_fd.get(), &info) != 0 || info.st_size != m_size)) {
    return Error::io("file " + m_path.string() + " changed size while it was being uploaded");
  }
  return {};
}

BodySource::BodySource(std::string_view memory)
    : m_memory(memory), m_size(static_cast<std::int64_t>(memory.size())) {}

BodySource::BodySource(base::FileDescriptor fd, fs::path path, std::int64_t size)
    : m_fd(std::move(fd)), m_path(std::move(path)), m_size(size) {}

Result<DownloadSink> DownloadSink::open(int fd, std::int64_t max_bytes) {
  struct stat info {};
  if (fd < 0 || ::fstat(fd, &info) != 0) {
    return Error::usage("S3 download target is not an open file descriptor (fd " + std::to_string(fd) + ")");
  }
  // Where the body starts: the current offset, or the end for O_APPEND
  // (writes go there whatever the offset). Only regular files can be rewound.
  off_t start = -1;
  if (S_ISREG(info.st_mode)) {
    const int flags = ::fcntl(fd, F_GETFL);
    start = (flags >= 0 && (flags & O_APPEND) != 0) ? info.st_size : ::lseek(fd, 0, SEEK_CUR);
  }
  return DownloadSink(fd, max_bytes, start);
}

Status DownloadSink::write(CURL* handle, const char* data, std::size_t size) {
  if (m_written == 0) {
    curl_off_t announced = -1;
    if (curl_easy_getinfo(handle, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &announced) == CURLE_OK &&
        announced > m_max_bytes) {
      return too_large(announced);
    }
  }
  if (m_written + static_cast<std::int64_t>(size) > m_max_bytes) {
    return too_large(m_written + static_cast<std::int64_t>(size));
  }
  OPCACHE_TRY(base::write_all(m_fd, data, size, description()));
  m_written += static_cast<std::int64_t>(size);
  return {};
}

Status DownloadSink::restart() {
  if (m_written == 0) {
    return {};
  }
  if (m_start < 0 || ::ftruncate(m_fd, m_start) != 0 || ::lseek(m_fd, m_start, SEEK_SET) != m_start) {
    return Error::remote("cannot retry: part of the body was already written to " + description());
  }
  m_written = 0;
  return {};
}

std::string DownloadSink::description() const { return "fd " + std::to_string(m_fd); }

Error DownloadSink::too_large(std::int64_t size) const {
  return Error::remote("the object is larger than the limit of " + std::to_string(m_max_bytes) + " bytes (" +
                       (m_written == 0 ? "announced " : "at least ") + std::to_string(size) + " bytes)");
}

}  // namespace opcache::remote
