// One line per request: time, client, method, target, status, bytes, duration,
// token name (never the token). Text or JSON lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "base/mutex.hpp"
#include "opcache/result.hpp"
#include "server/server_config.hpp"

namespace opcache::server {

/// What is logged about one request. Views into the caller's strings,
/// valid for the write() call.
struct AccessRecord {
  std::string_view client;  ///< "ip:port"
  std::string_view method;
  std::string_view target;
  int status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  double seconds = 0;
  std::string_view token_name = "-";
};

/// Writes access records to a file or standard error. Thread-safe without a
/// lock around the I/O: each line is one write(2) on a descriptor opened
/// with O_APPEND (or standard error), so lines never interleave (lines
/// longer than PIPE_BUF to a pipe are written under a lock).
class AccessLog {
 public:
  /// `path` empty or "-" means standard error.
  static Result<AccessLog> open(const std::filesystem::path& path, LogFormat format);
  AccessLog(AccessLog&& other) noexcept;
  AccessLog& operator=(AccessLog&&) = delete;
  ~AccessLog();

  void write(const AccessRecord& record);
  /// A free-form line for server events (start-up, reloads, shutdown).
  void event(const std::string& message);

 private:
  AccessLog(int fd, bool owned, LogFormat format) : m_fd(fd), m_owned(owned), m_format(format) {}

  // Writes `line` with one write(2) when it can.
  void emit(std::string_view line);

  int m_fd;
  bool m_owned;
  LogFormat m_format;
  base::Mutex m_mutex;  // held while writing a line longer than PIPE_BUF
};

}  // namespace opcache::server
