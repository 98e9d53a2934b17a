// Deciding, at a seccomp stop (the entry of a system call, before it runs),
// what the call is about to do to the paths it names: from its arguments and
// from the state of those paths now, as this process sees them.
#pragma once

#include "trace/event_log.hpp"
#include "trace/syscall_table.hpp"

namespace opcache::trace {

/// Records in `log` the events of the system call `stop` (process_tracer.hpp's
/// Access says which):
/// - open with O_WRONLY, O_RDWR, O_CREAT or O_TRUNC: `written`, and `read`
///   first when an existing regular file is opened O_RDWR without O_TRUNC;
///   read-only: `read` of an existing file other than a directory (with its
///   identity when regular), `absent` of a missing path; O_PATH opens are
///   look-ups and O_TMPFILE opens name no file;
/// - exec: `read` of the program and of the interpreters the kernel loads
///   for it (exec_image.hpp), `absent` of a missing one;
/// - look-ups (stat family, access, chdir; readlink when watched):
///   `absent` of a missing path only;
/// - getdents: `listed` of the directory;
/// - unlink, rmdir: `removed`; rename: `removed` source, `written` target
///   (both `written` for RENAME_EXCHANGE); of a missing path: `absent`;
/// - mkdir, link, symlink, mknod: `written` of a new name (an existing one
///   makes the call fail);
/// - truncate: `written`, or `absent` when missing.
/// A path that cannot be read or resolved, or a stop of a call the filter
/// reported as undecodable (another architecture, x32), makes `log` blind.
void classify_syscall(const SyscallStop& stop, EventLog& log);

}  // namespace opcache::trace
