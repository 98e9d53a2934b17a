// What Store::exec needs of processes besides the tracer: the command's
// standard input as keyable data, and running the command untraced (the
// cache bypassed, or a machine where tracing is refused).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "opcache/result.hpp"

namespace opcache::api {

/// The standard input a command gets, and its digest when it is data.
struct CommandInput {
  int fd = 0;                          ///< the descriptor to give the command
  std::optional<std::string> digest;   ///< "sha256:<hex>" of its data; std::nullopt when there is none
  base::FileDescriptor owned;          ///< a copy of a pipe's data, when one was made (fd is then this)
  /// Why the data cannot be keyed (a pipe that stays open with nothing in
  /// it: what the command would read from it later is unknown), or std::nullopt.
  std::optional<std::string> unkeyable;
};

/// Reads what `fd` holds for a command, without losing any of it: a
/// terminal, /dev/null, a closed descriptor or no bytes at all is not data
/// (no digest); a regular file is digested from its offset with pread (the
/// command still reads it from there); a pipe, socket or other stream that
/// has data or its end within 50 ms is read to its end into an unlinked file
/// in `temp_directory`, which the command then reads instead; one that stays
/// open and empty is `unkeyable`, untouched. `io` error when reading fails.
Result<CommandInput> capture_command_input(int fd, const std::filesystem::path& temp_directory);

/// Why a command run from this process could read a file the tracer does
/// not see: the first descriptor above 2 that it would inherit (not
/// close-on-exec) open for reading on a regular file, whose reads (read,
/// pread, mmap) pass no path, as the end of a "not cached: …" note; or
/// std::nullopt. Descriptors on pipes, sockets, devices and directories (a
/// make job server, a harness's log, a directory whose files are opened by
/// traced calls) and write-only ones are no reason.
std::optional<std::string> unseen_inherited_file();

/// Runs `argv` (argv[0] searched in PATH as execvp(3) does) with `stdin_fd`
/// as its standard input and this process's other descriptors and
/// environment, and waits for it: its exit status, 128 + the signal when a
/// signal ended it. `usage` error when it cannot be started.
Result<int> run_untraced(const std::vector<std::string>& argv, int stdin_fd);

}  // namespace opcache::api
