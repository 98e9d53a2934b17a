// Turning the path a tracee names into the absolute path it looks up: a
// relative path is resolved against the directory its descriptor argument
// names, or its working directory, as /proc/<tid>/fd/<n> and /proc/<tid>/cwd
// tell (so that directory comes with its symlinks resolved), then made
// lexically normal.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

namespace opcache::trace {

/// `absolute` with ".", ".." and repeated or trailing '/' removed, lexically
/// (no symlink is followed).
std::string normal_path(std::string_view absolute);

/// Whether `path` (absolute, normal) is /proc, /sys or /dev or under one of
/// them: files of the kernel and devices, never events. /dev/shm and what is
/// under it are not: a tmpfs of ordinary files.
bool is_pseudo_file_path(std::string_view path);

/// "process <tid> (<its command name>)", for messages; without the name
/// when /proc no longer has it.
std::string describe_tracee(pid_t tid);

/// The path descriptor `fd` of thread `tid` is open on, normal. std::nullopt
/// when `fd` is not open there or names no path (a pipe, a socket, an
/// anonymous inode). `io` when it names a directory or file since deleted,
/// or /proc cannot be read.
Result<std::optional<std::string>> tracee_descriptor_path(pid_t tid, int fd);

/// The absolute, normal path thread `tid` looks up when a system call names
/// `path` relative to descriptor `dirfd` (AT_FDCWD: its working directory).
/// /proc/self and /proc/thread-self become /proc/<tid>, and /dev/fd
/// /proc/<tid>/fd, which this process can read; a path through a process's
/// cwd, root or fd/<n> link becomes the file it leads to (/proc/self/cwd/k.h
/// is k.h), unless the link leads to no file path (a pipe, a deleted file);
/// ".." is resolved as the kernel does, after the symlinks before it
/// (link/../k.h is the k.h beside link's target). std::nullopt when the call
/// fails before looking anything up: an empty `path`, or a relative one
/// against a descriptor that is not open or names no directory. `io` when the directory cannot be known (deleted, /proc
/// unreadable): the caller cannot tell what the call touches.
Result<std::optional<std::string>> resolve_tracee_path(pid_t tid, int dirfd, const std::string& path);

}  // namespace opcache::trace
