// Request bodies and response sinks of the S3 client: what an upload reads
// from (a file streamed with pread, or a small string) and where a download
// goes (the caller's descriptor, rewindable for a retry when it is a file).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <string_view>

#include <curl/curl.h>

#include "opcache/result.hpp"
#include "base/file_io.hpp"

namespace opcache::remote {

/// The body of an upload. Move-only; one transfer at a time.
class BodySource {
 public:
  /// A body over `data`, which must outlive the source.
  static BodySource from_memory(std::string_view data);

  /// A body streamed from the regular file `path` (opened now; its size is
  /// fixed now). `usage` error for a non-regular file; open errors as is.
  static Result<BodySource> from_file(const std::filesystem::path& path);

  /// The size announced to the server.
  std::int64_t size() const noexcept { return m_size; }
  /// Moves the read position (0 ≤ offset ≤ size()).
  void seek(std::int64_t offset) noexcept { m_offset = offset; }

  /// Up to `capacity` bytes from the read position into `buffer`; 0 at the
  /// end. An `io` error when the file cannot be read or shrank.
  Result<std::size_t> read(char* buffer, std::size_t capacity);

  /// After the upload: an `io` error when the file no longer has the size
  /// that was announced.
  Status check_unchanged() const;

 private:
  explicit BodySource(std::string_view memory);
  BodySource(base::FileDescriptor fd, std::filesystem::path path, std::int64_t size);

  std::string_view m_memory;
  base::FileDescriptor m_fd;
  std::filesystem::path m_path;
  std::int64_t m_size = 0;
  std::int64_t m_offset = 0;
};

/// Receives the body of a successful GET into the caller's descriptor (not
/// owned), at most `max_bytes` of it. One transfer at a time.
class DownloadSink {
 public:
  /// A sink writing to `fd` from its current position (the end for O_APPEND).
  /// `usage` error when `fd` is not open.
  static Result<DownloadSink> open(int fd, std::int64_t max_bytes);

  /// Writes `size` bytes received on `handle`; a `remote` error when the body
  /// (announced, or received so far) exceeds the limit; `io` write errors.
  Status write(CURL* handle, const char* data, std::size_t size);

  /// Prepares a new attempt: truncates back to the start. A `remote` error
  /// when bytes already written cannot be undone (not a regular file).
  Status restart();

 private:
  DownloadSink(int fd, std::int64_t max_bytes, off_t start) : m_fd(fd), m_max_bytes(max_bytes), m_start(start) {}

  std::string description() const;
  Error too_large(std::int64_t size) const;

  int m_fd;
  std::int64_t m_max_bytes;
  off_t m_start;
  std::int64_t m_written = 0;
};

}  // namespace opcache::remote
