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

// The writers below put text at `at` and return the end of what they put;
// the caller made room (append_text_line).
char* put_text(char* at, std::string_view text) {
  std::memcpy(at, text.data(), text.size());
  return at + text.size();
}

// At most 20 characters.
char* put_number(char* at, std::uint64_t value) {
  return std::to_chars(at, at + 20, value).ptr;
}

// A duration in milliseconds with three decimals ("12.345"), as "%.3f" of
// the milliseconds prints it, without printf's floating-point formatting. At
// most 24 characters.
char* put_milliseconds(char* at, double seconds) {
  const auto micros = static_cast<std::uint64_t>(std::llround(std::max(seconds, 0.0) * 1e6));
  at = put_number(at, micros / 1000);
  *at++ = '.';
  *at++ = static_cast<char>('0' + micros / 100 % 10);
  *at++ = static_cast<char>('0' + micros / 10 % 10);
  *at++ = static_cast<char>('0' + micros % 10);
  return at;
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

// Appends the text line of `record` (docs/operations.md "Access log"): the
// room for its longest form is made once, then filled, rather than appended
// to piece by piece (a request's line cost ~1,500 instructions that way).
void append_text_line(std::string& out, std::string_view time, const AccessRecord& record) {
  static constexpr std::string_view k_in = " in=", k_out = " out=", k_token = "ms token=";
  const std::size_t longest = time.size() + record.client.size() + record.method.size() + record.target.size() +
                              record.token_name.size() + k_in.size() + k_out.size() + k_token.size() + 6 + 3 * 20 + 24;
  const std::size_t start = out.size();
  out.resize(start + longest);
  char* at = out.data() + start;
  at = put_text(at, time);
  *at++ = ' ';
  at = put_text(at, record.client);
  *at++ = ' ';
  at = put_text(at, record.method);
  *at++ = ' ';
  at = put_text(at, record.target);
  *at++ = ' ';
  at = put_number(at, static_cast<std::uint64_t>(record.status));
  at = put_text(at, k_in);
  at = put_number(at, record.bytes_in);
  at = put_text(at, k_out);
  at = put_number(at, record.bytes_out);
  *at++ = ' ';
  at = put_milliseconds(at, record.seconds);
  at = put_text(at, k_token);
  at = put_text(at, record.token_name);
  *at++ = '\n';
  out.resize(static_cast<std::size_t>(at - out.data()));
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

void AccessLog::write_waiting_and_unlock() {
  m_write_mutex.lock();
  m_writing.swap(m_waiting);
  m_mutex.unlock();
  write_all(m_fd, m_writing);
  m_writing.clear();
  m_write_mutex.unlock();
}

void AccessLog::flush() {
  m_mutex.lock();
  write_waiting_and_unlock();
}

template <class Append>
void AccessLog::keep(const Append& append, bool now_too) {
  const auto now = Clock::now();
  m_mutex.lock();
  if (m_waiting.empty()) {
    m_oldest = now;
  }
  append(m_waiting);
  if (now_too || m_waiting.size() >= k_batch_bytes || now - m_oldest >= m_flush_interval) {
    write_waiting_and_unlock();
  } else {
    m_mutex.unlock();
  }
}

void AccessLog::emit(std::string_view line, bool now_too) {
  keep([line](std::string& waiting) { waiting.append(line); }, now_too);
}

void AccessLog::write(const AccessRecord& record) {
  if (!m_requests) {
    return;
  }
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
    emit(object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n", false);
    return;
  }
  // A text line is formatted straight into the waiting lines, under the lock
  // it must take anyway: no line of its own to allocate, fill, copy and free
  // per request (the buffer keeps its capacity from batch to batch).
  keep([&](std::string& waiting) { append_text_line(waiting, time, record); }, false);
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
