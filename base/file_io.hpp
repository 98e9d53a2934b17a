// POSIX file helpers: owned descriptors, whole-file reads, crash-safe
// publication (temp file + fsync + rename + directory fsync).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::base {

namespace fs = std::filesystem;

/// An `io` (or `not_found` for ENOENT) error: "<what> <path>: <strerror>".
Error errno_error(const std::string& what, const fs::path& path, int error_number);

/// Owns a file descriptor; closes it on destruction. Move-only.
class FileDescriptor {
 public:
  FileDescriptor() = default;
  explicit FileDescriptor(int fd) noexcept : m_fd(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : m_fd(other.release()) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();

  int get() const noexcept { return m_fd; }
  bool valid() const noexcept { return m_fd >= 0; }
  int release() noexcept;
  void reset() noexcept;

 private:
  int m_fd = -1;
};

/// Opens `path` read-only (O_CLOEXEC, O_NOFOLLOW when `follow_symlinks` is false).
Result<FileDescriptor> open_for_reading(const fs::path& path, bool follow_symlinks = true);

/// Reads up to `size` bytes; 0 means end of file. Retries on EINTR.
Result<std::size_t> read_some(int fd, void* buffer, std::size_t size, const fs::path& path_for_errors);

/// Reads until `size` bytes are in `buffer` or the file ends; returns how
/// many were read (fewer than `size` only at end of file). Retries on EINTR
/// and short reads.
Result<std::size_t> read_up_to(int fd, void* buffer, std::size_t size, const fs::path& path_for_errors);

/// Writes all `size` bytes or fails. Retries on EINTR and short writes.
Status write_all(int fd, const void* data, std::size_t size, const fs::path& path_for_errors);

/// Reads a whole file. ENOENT is `not_found`; anything else is `io`.
Result<std::string> read_file(const fs::path& path);

/// Reads a small state file kept in a directory others may reach (breaker
/// and failure records): never through a symlink at `path` (ELOOP is `io`),
/// only a regular file (`io` otherwise), and at most `max_bytes` (a longer
/// file is `corrupt`), so a planted link, FIFO or huge file costs nothing.
Result<std::string> read_small_file(const fs::path& path, std::size_t max_bytes = 65536);

/// When a file written through AtomicFile reaches the disk. `synced`: the file
/// and its directory are fsynced before the call returns, so the name never
/// survives a power cut without its bytes. `deferred`: no fsync, for files
/// the caller can afford to lose to a power cut (copies of a remote's
/// entries, state a later run rebuilds) — a reader must then verify what it
/// reads.
enum class Durability { synced, deferred };

/// Writes a whole file through `AtomicFile` (readers see the old or the new
/// file), synced unless `durability` is deferred (AtomicFile::commit).
Status write_file_atomic(const fs::path& path, std::string_view contents, Durability durability = Durability::synced);

/// fsync on a directory, so a rename inside it survives a power cut.
Status fsync_directory(const fs::path& directory);

/// Creates `directory` and its parents if needed.
Status ensure_directory(const fs::path& directory);

/// True for the mode of a directory set up for a group sharing it: setgid
/// and group-writable, as `--shared-group` makes the cache root and its
/// subdirectories (docs/configuration.md, shared_group).
bool is_group_shared_mode(unsigned mode) noexcept;

/// When `directory_mode` is group-shared, gives the new file or directory
/// `fd` (which this process owns) group read and write, plus search and
/// setgid for a directory, on top of what the umask left; does nothing
/// otherwise or when `fd` belongs to another user. `io` error naming `path`.
Status share_with_group_like(unsigned directory_mode, int fd, const fs::path& path);

/// 16 lowercase hex characters from the system's random source.
std::string random_token();

/// A new file in `directory` that becomes visible under its final name only
/// when `commit()` succeeds; otherwise the destructor removes it (ccache's
/// AtomicFile, Nix's temp-then-rename). The temp name is "<pid>-<random>.tmp"
/// so `verify` can tell a live writer's file from a dead one's.
class AtomicFile {
 public:
  /// Creates the temp file in `temp_directory` (same file system as the target).
  static Result<AtomicFile> create(const fs::path& temp_directory);

  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  int fd() const noexcept { return m_fd.get(); }
  const fs::path& temp_path() const noexcept { return m_temp_path; }

  Status write(const void* data, std::size_t size) { return write_all(m_fd.get(), data, size, m_temp_path); }

  /// fsyncs (unless `deferred`) and closes the temp file; further writes
  /// fail. Idempotent.
  Status finish_writing(Durability durability = Durability::synced);

  /// finish_writing(), then renames onto `target` (replacing it atomically)
  /// and fsyncs the target's directory (with `deferred`: neither the file
  /// nor the directory). After success the object is inert.
  Status commit(const fs::path& target, Durability durability = Durability::synced);

  /// finish_writing(), then hard-links the temp file to `target` unless
  /// `target` exists (returns false then). The temp file itself stays until
  /// destruction, so the caller can link it again if `target` disappears.
  /// With `deferred`, neither the file nor the directory is fsynced.
  Result<bool> link_if_absent(const fs::path& target, Durability durability = Durability::synced);

 private:
  AtomicFile(FileDescriptor directory, FileDescriptor fd, fs::path temp_path)
      : m_directory(std::move(directory)), m_fd(std::move(fd)), m_temp_path(std::move(temp_path)) {}
  std::string temp_name() const { return m_temp_path.filename().string(); }

  FileDescriptor m_directory;
  FileDescriptor m_fd;
  fs::path m_temp_path;
  bool m_done = false;
  bool m_closed = false;
};

/// Parses the pid out of a temp file name made by AtomicFile ("<pid>-<hex>.tmp");
/// 0 when the name is not of that form.
long temp_file_owner_pid(const std::string& file_name);

/// True when a process with this pid exists (kill(pid, 0)).
bool process_alive(long pid);

}  // namespace opcache::base
