// A fresh directory per test case, removed afterwards.
#pragma once

#include <filesystem>
#include <string>

namespace opcache::test {

/// Creates a unique directory under $TMPDIR (or /tmp); removes it, recursively,
/// on destruction unless OPCACHE_KEEP_TEST_DIRS is set.
class TempDir {
 public:
  TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const noexcept { return m_path; }
  std::filesystem::path operator/(const std::string& name) const { return m_path / name; }

 private:
  std::filesystem::path m_path;
};

/// Creates a new directory "<$TMPDIR or /tmp>/<prefix>-XXXXXX" and returns its
/// path; the caller owns (and removes) it. Throws std::runtime_error on failure.
std::filesystem::path make_unique_dir(const std::string& prefix);

/// Writes `contents` to `path` (creating parent directories).
void write_text(const std::filesystem::path& path, const std::string& contents);

/// write_text, then makes `path` executable: mode rwxr-x--- (a script or
/// stand-in program a test runs).
void write_executable(const std::filesystem::path& path, const std::string& contents);

/// Reads a whole file; empty string if it cannot be read.
std::string read_text(const std::filesystem::path& path);

}  // namespace opcache::test
