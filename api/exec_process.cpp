#include "api/exec_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/sha256.hpp"
#include "base/try.hpp"
#include "trace/tracee_paths.hpp"

extern char** environ;

namespace opcache::api {

namespace {

constexpr std::size_t k_chunk = 64 * 1024;
constexpr int k_stream_wait_ms = 50;  // how long a pipe may stay silent before it counts as open and empty

std::string errno_text() { return std::strerror(errno); }

// A character device that is /dev/null (Linux: major 1, minor 3).
bool is_dev_null(const struct stat& info) {
  return S_ISCHR(info.st_mode) && major(info.st_rdev) == 1 && minor(info.st_rdev) == 3;
}

// SHA-256 of a regular file's bytes from `offset` to its end, read with
// pread so the descriptor's offset does not move.
Result<std::string> digest_from_offset(int fd, off_t offset) {
  base::Sha256 hasher;
  std::string buffer(k_chunk, '\0');
  for (;;) {
    const ssize_t got = ::pread(fd, buffer.data(), buffer.size(), offset);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      return Error::io("cannot read standard input: " + errno_text());
    }
    if (got == 0) {
      return "sha256:" + hasher.finish_hex();
    }
    hasher.update(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
    offset += got;
  }
}

// Copies a stream to its end into an unlinked file in `directory`, digesting
// it on the way, and rewinds the copy.
Result<CommandInput> copy_stream(int fd, const std::filesystem::path& directory) {
  base::FileDescriptor copy(::open(directory.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!copy.valid()) {
    return Error::io("cannot make a file for standard input in " + directory.string() + ": " + errno_text());
  }
  base::Sha256 hasher;
  std::string buffer(k_chunk, '\0');
  for (;;) {
    const ssize_t got = ::read(fd, buffer.data(), buffer.size());
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got < 0) {
      return Error::io("cannot read standard input: " + errno_text());
    }
    if (got == 0) {
      break;
    }
    hasher.update(std::string_view(buffer.data(), static_cast<std::size_t>(got)));
    OPCACHE_TRY(base::write_all(copy.get(), buffer.data(), static_cast<std::size_t>(got), directory / "(standard input)"));
  }
  if (::lseek(copy.get(), 0, SEEK_SET) < 0) {
    return Error::io("cannot rewind the copy of standard input: " + errno_text());
  }
  CommandInput input;
  input.fd = copy.get();
  if (::lseek(copy.get(), 0, SEEK_END) > 0) {  // no bytes is no data, as /dev/null
    input.digest = "sha256:" + hasher.finish_hex();
  }
  ::lseek(copy.get(), 0, SEEK_SET);
  input.owned = std::move(copy);
  return input;
}

}  // namespace

Result<CommandInput> capture_command_input(int fd, const std::filesystem::path& temp_directory) {
  struct stat info {};
  if (::fstat(fd, &info) != 0 || ::isatty(fd) || is_dev_null(info)) {
    return CommandInput{fd, std::nullopt, {}, std::nullopt};  // closed, a terminal or nothing: no data to key
  }
  if (S_ISREG(info.st_mode)) {
    const off_t offset = std::max<off_t>(::lseek(fd, 0, SEEK_CUR), 0);
    if (offset >= info.st_size) {
      return CommandInput{fd, std::nullopt, {}, std::nullopt};
    }
    OPCACHE_TRY_ASSIGN(auto digest, digest_from_offset(fd, offset));
    return CommandInput{fd, std::move(digest), {}, std::nullopt};
  }
  pollfd ready{fd, POLLIN, 0};
  int polled = 0;
  while ((polled = ::poll(&ready, 1, k_stream_wait_ms)) < 0 && errno == EINTR) {
  }
  if (polled == 0) {
    return CommandInput{fd, std::nullopt, {},
                        "standard input is a pipe that stays open with nothing in it, so what the command reads from "
                        "it cannot be keyed (give it a file, or </dev/null)"};
  }
  return copy_stream(fd, temp_directory);
}

std::optional<std::string> unseen_inherited_file() {
  DIR* listing = ::opendir("/proc/self/fd");
  if (listing == nullptr) {
    return std::nullopt;  // no /proc: nothing to tell (the tracer needs /proc anyway)
  }
  const int own = ::dirfd(listing);
  std::optional<std::string> reason;
  while (const dirent* entry = ::readdir(listing)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0' || fd <= 2 || fd == own) {
      continue;
    }
    const int descriptor = static_cast<int>(fd);
    const int fd_flags = ::fcntl(descriptor, F_GETFD);
    const int status_flags = ::fcntl(descriptor, F_GETFL);
    struct stat info {};
    if (fd_flags < 0 || (fd_flags & FD_CLOEXEC) != 0 || status_flags < 0 || (status_flags & O_PATH) != 0 ||
        (status_flags & O_ACCMODE) == O_WRONLY || ::fstat(descriptor, &info) != 0 || !S_ISREG(info.st_mode)) {
      continue;
    }
    const auto path = trace::tracee_descriptor_path(::getpid(), descriptor);
    const std::string file = path && *path ? **path : "a file";  // deleted, or /proc unreadable
    reason = "the command inherits descriptor " + std::to_string(descriptor) + ", open for reading on " + file +
             ", whose reads the tracer cannot see (close it for the command: " + std::to_string(descriptor) + "<&-)";
    break;
  }
  ::closedir(listing);
  return reason;
}

Result<int> run_untraced(const std::vector<std::string>& argv, int stdin_fd) {
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  if (stdin_fd != 0) {
    ::posix_spawn_file_actions_adddup2(&actions, stdin_fd, 0);
  }
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return Error::usage("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Error::io("waitpid failed: " + errno_text());
    }
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace opcache::api
