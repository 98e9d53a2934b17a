#include "tests/fuzz/fuzz_support.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace opcache::fuzz {

namespace {

[[noreturn]] void harness_failure(const std::string& what) {
  std::fprintf(stderr, "fuzz harness: %s\n", what.c_str());
  std::abort();
}

void remove_scratch();

std::filesystem::path make_scratch() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/opcache-fuzz-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) {
    harness_failure("cannot create a scratch directory from " + pattern);
  }
  std::atexit(remove_scratch);
  return pattern;
}

const std::filesystem::path& scratch_path() {
  static const std::filesystem::path path = make_scratch();
  return path;
}

void remove_scratch() {
  std::error_code ignored;
  std::filesystem::remove_all(scratch_path(), ignored);
}

}  // namespace

const std::filesystem::path& scratch_directory() { return scratch_path(); }

void write_file(const std::filesystem::path& path, std::string_view bytes) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    harness_failure("cannot write " + path.string());
  }
}

std::vector<std::string_view> split_parts(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (auto at = text.find(k_part_separator); at != std::string_view::npos;
       at = text.find(k_part_separator, start)) {
    parts.push_back(text.substr(start, at - start));
    start = at + k_part_separator.size();
  }
  parts.push_back(text.substr(start));
  return parts;
}

void trace(const std::string& line) {
  static const bool enabled = std::getenv("OPCACHE_FUZZ_TRACE") != nullptr;
  if (enabled) {
    std::fprintf(stderr, "trace: %s\n", line.c_str());
  }
}

}  // namespace opcache::fuzz
