// One line per request: time, client, method, target, status, bytes, duration,
// token name (never the token). Text or JSON lines.
#pragma once

#include <chrono>
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

/// Writes access records to a file or standard error. Lines wait in memory
/// and are written together, so a busy server makes one write(2) per batch
/// rather than one per request: when the oldest waiting line has waited
/// `flush_interval` (checked as each line arrives, and by flush(), which the
/// server calls on a timer), when k_batch_bytes are waiting, before every
/// event, and when the log is destroyed. A zero interval writes each line at
/// once. Thread-safe: lines are kept under one lock and each batch is
/// written under a second, so they never interleave and keep their order,
/// and a batch's write(2) does not hold up requests that add lines. A
/// kill -9 loses at most the lines still waiting.
class AccessLog {
 public:
  /// Waiting lines are written once they reach this many bytes.
  static constexpr std::size_t k_batch_bytes = 64 << 10;

  /// The path that turns request lines off (nginx's `access_log off`);
  /// events still go to standard error. A file named "off" is "./off".
  static constexpr std::string_view k_off = "off";

  /// `path` empty or "-" means standard error; k_off, no request lines.
  static Result<AccessLog> open(const std::filesystem::path& path, LogFormat format,
                                std::chrono::milliseconds flush_interval = std::chrono::milliseconds(0));
  AccessLog(AccessLog&& other) noexcept;
  AccessLog& operator=(AccessLog&&) = delete;
  /// Writes the lines still waiting.
  ~AccessLog();

  /// Keeps (or writes, as the class comment says) the line of one request;
  /// nothing when request lines are off.
  void write(const AccessRecord& record);
  /// A free-form line for server events (start-up, reloads, shutdown),
  /// written at once, after the lines waiting before it.
  void event(const std::string& message);
  /// Writes the lines waiting now.
  void flush();

 private:
  using Clock = std::chrono::steady_clock;

  AccessLog(int fd, bool owned, LogFormat format, std::chrono::milliseconds flush_interval, bool requests = true)
      : m_fd(fd), m_owned(owned), m_requests(requests), m_format(format), m_flush_interval(flush_interval) {}

  // Keeps `line`, then writes the waiting lines if they are due (or `now_too`).
  void emit(std::string_view line, bool now_too);
  // Appends to the waiting lines under m_mutex (`append(std::string&)`), then
  // writes them if they are due (or `now_too`).
  template <class Append>
  void keep(const Append& append, bool now_too);
  // Takes the waiting lines out, releases m_mutex and writes them under
  // m_write_mutex, taken before the release: the next batch waits for this
  // one, so batches keep their order, while requests keep adding lines.
  void write_waiting_and_unlock() RELEASE(m_mutex);

  int m_fd;
  bool m_owned;
  bool m_requests;  // whether request lines are written (not k_off)
  LogFormat m_format;
  std::chrono::milliseconds m_flush_interval;
  base::Mutex m_mutex;
  std::string m_waiting GUARDED_BY(m_mutex);  // whole lines, oldest first
  Clock::time_point m_oldest GUARDED_BY(m_mutex);
  base::Mutex m_write_mutex;                          // taken after m_mutex, never before it
  std::string m_writing GUARDED_BY(m_write_mutex);  // the batch being written (its capacity kept)
};

}  // namespace opcache::server
