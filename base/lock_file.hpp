// Exclusive inter-process locks on files (flock). The kernel releases a lock
// when its holder dies, which is what lets a waiter take over from a crashed
// builder at once.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>

#include "opcache/result.hpp"
#include "base/file_io.hpp"

namespace opcache::base {

/// A held lock on a path. Move-only; released on destruction.
class LockFile {
 public:
  /// Takes the lock if it is free; std::nullopt when another holder has it.
  /// Creates the file if needed. Checks, after locking, that the path still
  /// names the locked file (a holder may unlink it), and retries if not.
  static Result<std::optional<LockFile>> try_acquire(const std::filesystem::path& path);

  /// Waits until the lock is free, polling every `poll` up to `timeout`
  /// (`timeout` error then). `waited` is set when the lock was not free at once.
  static Result<LockFile> acquire(const std::filesystem::path& path, std::chrono::milliseconds timeout,
                                  std::chrono::milliseconds poll, bool* waited = nullptr);

  LockFile(LockFile&&) noexcept = default;
  LockFile& operator=(LockFile&&) noexcept = default;
  ~LockFile() = default;  // closing the descriptor releases the lock

  /// Removes the lock file, then releases the lock. Waiters notice that the
  /// path no longer names the file they locked and start again on a new file.
  void unlink_and_release();

 private:
  LockFile(FileDescriptor fd, std::filesystem::path path) : m_fd(std::move(fd)), m_path(std::move(path)) {}

  FileDescriptor m_fd;
  std::filesystem::path m_path;
};

}  // namespace opcache::base
