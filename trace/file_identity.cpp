// FileIdentity from stat(2): what the tracer records at a file's first use
// and what exec compares after the run (store/observed_inputs.cpp).
#include <sys/stat.h>

#include "trace/process_tracer.hpp"

namespace opcache::trace {

namespace {

std::int64_t nanoseconds_of(const timespec& time) {
  return static_cast<std::int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

}  // namespace

FileIdentity identity_of_stat(const struct ::stat& info) noexcept {
  return FileIdentity{static_cast<std::uint64_t>(info.st_dev), static_cast<std::uint64_t>(info.st_ino),
                      static_cast<std::int64_t>(info.st_size), nanoseconds_of(info.st_mtim),
                      nanoseconds_of(info.st_ctim)};
}

std::optional<FileIdentity> file_identity(const std::string& path) {
  struct ::stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return std::nullopt;
  }
  return identity_of_stat(info);
}

}  // namespace opcache::trace
