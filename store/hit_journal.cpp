#include "store/hit_journal.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <map>

#include "base/file_io.hpp"
#include "base/try.hpp"
#include "store/key.hpp"

namespace opcache::store {

namespace {

// flock that retries when a signal interrupts the wait.
Status lock(int fd, int operation, const std::filesystem::path& path) {
  while (::flock(fd, operation) != 0) {
    if (errno != EINTR) {
      return base::errno_error("cannot lock", path, errno);
    }
  }
  return {};
}

bool parse_count(std::string_view text, std::int64_t& value) {
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  return ec == std::errc() && ptr == end && value >= 0;
}

// The next space-separated field of `line`, advancing it; empty at the end.
std::string_view next_field(std::string_view& line) {
  const auto space = line.find(' ');
  auto field = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return field;
}

std::vector<HitRecord> parse_journal(std::string_view text) {
  std::map<std::string, HitRecord, std::less<>> by_key;
  while (!text.empty()) {
    const auto newline = text.find('\n');
    if (newline == std::string_view::npos) {
      break;  // torn by a crash mid-write
    }
    HitRecord record;
    if (parse_hit_record(text.substr(0, newline), record)) {
      auto [it, inserted] = by_key.try_emplace(record.key, record);
      if (!inserted) {
        add_hits(it->second, record);
      }
    }
    text.remove_prefix(newline + 1);
  }
  std::vector<HitRecord> records;
  records.reserve(by_key.size());
  for (auto& [key, record] : by_key) {
    records.push_back(std::move(record));
  }
  return records;
}

}  // namespace

void add_hits(HitRecord& into, const HitRecord& more) {
  into.hits += more.hits;
  into.last_access_ms = std::max(into.last_access_ms, more.last_access_ms);
  into.bytes += more.bytes;
  into.saved_ms += more.saved_ms;
}

std::string format_hit_record(const HitRecord& record) {
  return record.key + ' ' + std::to_string(record.hits) + ' ' + std::to_string(record.last_access_ms) + ' ' +
         std::to_string(record.bytes) + ' ' + std::to_string(record.saved_ms) + '\n';
}

bool parse_hit_record(std::string_view line, HitRecord& record) {
  const auto key = next_field(line);
  if (!check_key(key)) {
    return false;
  }
  record.key = std::string(key);
  return parse_count(next_field(line), record.hits) && parse_count(next_field(line), record.last_access_ms) &&
         parse_count(next_field(line), record.bytes) && parse_count(next_field(line), record.saved_ms) &&
         line.empty();
}

Result<int> HitJournal::append_fd() {
  if (m_append.valid()) {
    return m_append.get();
  }
  const auto path = m_layout.hit_journal();
  base::FileDescriptor journal(::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!journal.valid()) {
    return base::errno_error("cannot open", path, errno);
  }
  if (m_layout.sharing() == Sharing::group) {
    OPCACHE_TRY(base::share_with_group_like(S_ISGID | S_IWGRP, journal.get(), path));
  }
  m_append = std::move(journal);
  return m_append.get();
}

Result<std::int64_t> HitJournal::append(const std::vector<HitRecord>& records) {
  if (records.empty()) {
    return std::int64_t{0};
  }
  std::string lines;
  for (const auto& record : records) {
    lines += format_hit_record(record);
  }
  const auto path = m_layout.hit_journal();
  base::MutexLock guard(m_mutex);
  OPCACHE_TRY_ASSIGN(int fd, append_fd());
  // Shared: appends do not wait for each other, only for a fold in progress.
  OPCACHE_TRY(lock(fd, LOCK_SH, path));
  auto written = base::write_all(fd, lines.data(), lines.size(), path);
  struct stat info {};
  const bool sized = ::fstat(fd, &info) == 0;
  (void)::flock(fd, LOCK_UN);
  OPCACHE_TRY(written);
  return sized ? static_cast<std::int64_t>(info.st_size) : std::int64_t{0};
}

Result<std::vector<HitRecord>> HitJournal::take() const {
  const auto path = m_layout.hit_journal();
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return std::vector<HitRecord>();
    }
    return base::errno_error("cannot open", path, errno);
  }
  base::FileDescriptor journal(fd);
  // Exclusive, and only while reading and emptying: appenders wait microseconds.
  OPCACHE_TRY(lock(fd, LOCK_EX, path));
  std::string text;
  char buffer[65536];
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t got, base::read_some(fd, buffer, sizeof buffer, path));
    if (got == 0) {
      break;
    }
    text.append(buffer, got);
  }
  if (!text.empty() && ::ftruncate(fd, 0) != 0) {
    return base::errno_error("cannot empty", path, errno);
  }
  return parse_journal(text);
}

}  // namespace opcache::store
