#include "server/access_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>

#include <nlohmann/json.hpp>

#include "store/manifest.hpp"

namespace opcache::server {

namespace {

void append_number(std::string& out, std::uint64_t value) {
  char digits[24];
  auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, end);
}

// A duration in milliseconds with three decimals ("12.345"), as "%.3f" of
// the milliseconds prints it, without printf's floating-point formatting.
void append_milliseconds(std::string& out, double seconds) {
  const auto micros = static_cast<std::uint64_t>(std::llround(std::max(seconds, 0.0) * 1e6));
  append_number(out, micros / 1000);
  const char fraction[4] = {'.', static_cast<char>('0' + micros / 100 % 10), static_cast<char>('0' + micros / 10 % 10),
                            static_cast<char>('0' + micros % 10)};
  out.append(fraction, sizeof fraction);
}

// The current second as RFC 3339 UTC text, formatted once per second per thread.
const std::string& now_text() {
  thread_local std::time_t second = 0;
  thread_local std::string text;
  const std::time_t now = std::time(nullptr);
  if (now != second || text.empty()) {
    second = now;
    text = store::rfc3339_now();
  }
  return text;
}

// Writes all of `line` to `fd`, with one write(2) when it can. A failing
// log has nowhere to report to: the rest of the line is dropped.
void write_all(int fd, std::string_view line) {
  while (!line.empty()) {
    const ssize_t wrote = ::write(fd, line.data(), line.size());
    if (wrote < 0 && errno == EINTR) {
      continue;
    }
    if (wrote <= 0) {
      return;
    }
    line.remove_prefix(static_cast<std::size_t>(wrote));
  }
}

}  // namespace

Result<AccessLog> AccessLog::open(const std::filesystem::path& path, LogFormat format,
                                  std::chrono::milliseconds flush_interval) {
  if (path.empty() || path == "-") {
    return AccessLog(STDERR_FILENO, false, format, flush_interval);
  }
  if (path == k_off) {
    return AccessLog(STDERR_FILENO, false, format, flush_interval, /*requests=*/false);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0666);
  if (fd < 0) {
    return Error::io("cannot open access log " + path.string() + ": " + std::strerror(errno));
  }
  return AccessLog(fd, true, format, flush_interval);
}

AccessLog::AccessLog(AccessLog&& other) noexcept
    : m_fd(other.m_fd),
      m_owned(other.m_owned),
      m_requests(other.m_requests),
      m_format(other.m_format),
      m_flush_interval(other.m_flush_interval) {
  base::MutexLock lock(other.m_mutex);
  m_waiting = std::move(other.m_waiting);
  m_oldest = other.m_oldest;
  other.m_waiting.clear();
  other.m_owned = false;
}

AccessLog::~AccessLog() {
  flush();
  if (m_owned) {
    ::close(m_fd);
  }
}

void AccessLog::write_waiting() {
  write_all(m_fd, m_waiting);
  m_waiting.clear();
}

void AccessLog::flush() {
  base::MutexLock lock(m_mutex);
  write_waiting();
}

void AccessLog::emit(std::string_view line, bool now_too) {
  const auto now = Clock::now();
  base::MutexLock lock(m_mutex);
  if (m_waiting.empty()) {
    m_oldest = now;
  }
  m_waiting.append(line);
  if (now_too || m_waiting.size() >= k_batch_bytes || now - m_oldest >= m_flush_interval) {
    write_waiting();
  }
}

void AccessLog::write(const AccessRecord& record) {
  if (!m_requests) {
    return;
  }
  std::string line;
  const std::string& time = now_text();
  if (m_format == LogFormat::json) {
    nlohmann::json object = {{"time", time},
                             {"client", record.client},
                             {"method", record.method},
                             {"target", record.target},
                             {"status", record.status},
                             {"bytes_in", record.bytes_in},
                             {"bytes_out", record.bytes_out},
                             {"duration_ms", record.seconds * 1000.0},
                             {"token", record.token_name}};
    line = object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  } else {
    line.reserve(time.size() + record.client.size() + record.method.size() + record.target.size() +
                 record.token_name.size() + 96);
    line.append(time).append(" ").append(record.client).append(" ").append(record.method).append(" ");
    line.append(record.target).append(" ");
    append_number(line, static_cast<std::uint64_t>(record.status));
    line.append(" in=");
    append_number(line, record.bytes_in);
    line.append(" out=");
    append_number(line, record.bytes_out);
    line.append(" ");
    append_milliseconds(line, record.seconds);
    line.append("ms token=");
    line.append(record.token_name).append("\n");
  }
  emit(line, false);
}

void AccessLog::event(const std::string& message) {
  std::string line;
  if (m_format == LogFormat::json) {
    line = nlohmann::json{{"time", store::rfc3339_now()}, {"event", message}}.dump() + "\n";
  } else {
    line = store::rfc3339_now() + " opcache serve: " + message + "\n";
  }
  emit(line, true);
}

}  // namespace opcache::server
