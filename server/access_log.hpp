// One line per request: time, client, method, target, status, bytes, duration,
// token name (never the token). Text or JSON lines.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <string>

#include "opcache/result.hpp"
#include "server/server_config.hpp"

namespace opcache::server {

/// What is logged about one request.
struct AccessRecord {
  std::string client;  ///< "ip:port"
  std::string method;
  std::string target;
  int status = 0;
  std::uint64_t bytes_in = 0;
  std::uint64_t bytes_out = 0;
  double seconds = 0;
  std::string token_name = "-";
};

/// Writes access records to a file or standard error. Thread-safe; each
/// record is one write, so lines never interleave.
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
  AccessLog(std::FILE* file, bool owned, LogFormat format) : m_file(file), m_owned(owned), m_format(format) {}

  std::FILE* m_file;
  bool m_owned;
  LogFormat m_format;
  std::mutex m_mutex;
};

}  // namespace opcache::server
