// A circuit breaker shared by every process using one cache directory: once
// a remote fails, it is skipped until a cool-down passes, so a dead remote
// costs one timeout for a whole build — also when each compile is a separate
// `opcache exec` process. State: <cache>/remotes/<id>.breaker (JSON).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

namespace opcache::remote {

class CircuitBreaker {
 public:
  /// `state_dir` is created when needed; `clock_ms` returns Unix ms.
  CircuitBreaker(std::filesystem::path state_dir, const std::string& remote_name, int cooldown_s,
                 std::function<std::int64_t()> clock_ms);

  /// False while a failure recorded by any process is younger than the cool-down.
  bool allows() const;
  /// Opens the breaker for the cool-down, for every process.
  void record_failure(const std::string& reason);
  /// Closes it again (removes the state file if there is one).
  void record_success();

  const std::filesystem::path& state_file() const noexcept { return m_file; }

 private:
  std::filesystem::path m_dir;
  std::filesystem::path m_file;
  std::string m_name;
  int m_cooldown_s;
  std::function<std::int64_t()> m_clock_ms;
};

/// A short stable id for a remote (hex of the SHA-256 of its display URL).
std::string remote_id(const std::string& remote_name);

}  // namespace opcache::remote
