// Runs a command and records what its whole process tree does to the file
// system: the files it reads or executes, the paths it looks up and does not
// find, the directories it lists, and the files it creates, writes or
// removes. Built on ptrace(2), which follows the tree, with a seccomp-bpf
// filter that hands the tracer only the system calls that name a file, so
// that statically linked programs are seen too and the other system calls
// run at full speed. Those calls reach the tracer as ptrace stops, or on
// request as seccomp user notifications (TraceMechanism).
// readlink(2) is not among them (glibc's realpath(3) calls it once per path
// component, three quarters of a compile's stops): a path that only
// readlink looks up is not reported `absent` (trace/syscall_table.cpp,
// k_watch_readlink).
// Linux only (x86_64 and aarch64).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::trace {

/// What the traced tree did to a path.
enum class Access {
  read,      ///< opened while it existed, for reading or read-write
  executed,  ///< run by execve (a program that existed), or loaded by the kernel for it: a `#!` interpreter, the ELF loader
  absent,   ///< looked up (open, stat, access, exec, readlink...) and not found (ENOENT/ENOTDIR)
  listed,   ///< a directory whose entries were read (getdents)
  written,  ///< opened for writing, created, truncated, the target of a rename or a link, a new directory
  removed,  ///< unlinked, removed as a directory, or the source of a rename
};

/// What identifies one version of a file: enough to tell, after the command,
/// whether a file it read was changed meanwhile (by the tree or by anyone).
struct FileIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  std::int64_t size = 0;
  std::int64_t mtime_ns = 0;
  std::int64_t ctime_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

/// The identity of what stat(2) says of a file.
FileIdentity identity_of_stat(const struct ::stat& info) noexcept;

/// The identity of the file at `path` now (symlinks followed), or
/// std::nullopt when it cannot be stat'ed. Thread-safe.
std::optional<FileIdentity> file_identity(const std::string& path);

/// One access. `path` is absolute and lexically normal (".", ".." and
/// repeated '/' removed; symlinks are not resolved, except in the directory
/// a relative path was resolved against, which the kernel reports resolved).
struct PathEvent {
  std::string path;
  Access access = Access::read;
  /// For `read` and `executed` of a regular file: its identity when the tree first used it.
  std::optional<FileIdentity> identity;
};

/// How the system calls that name a file reach the tracer. Under either,
/// the kernel's seccomp filter picks them at their entry, the tracer
/// classifies each before it runs, and ptrace follows the tree (fork, exec,
/// exits, signals); the events reported are the same.
enum class TraceMechanism {
  /// SECCOMP_RET_TRACE: a ptrace stop, which the thread that follows the tree
  /// resumes. Each costs two wake-ups across CPUs (~11 us on 2 vCPUs).
  ptrace_stop,
  /// SECCOMP_RET_USER_NOTIF: a notification answered, with
  /// SECCOMP_USER_NOTIF_FLAG_CONTINUE, by a listener thread woken on the
  /// caller's CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6: ~5 us; a
  /// kernel without that flag makes it slower than a ptrace stop). Calls of
  /// another architecture's convention and x32 calls still stop under
  /// ptrace. A process of the tree cannot install a seccomp filter of its
  /// own with a listener (EBUSY: one listener per filter chain). A call a
  /// signal interrupts before the listener receives it is restarted by the
  /// tracer at the signal's delivery, whatever the handler's SA_RESTART
  /// (trace/interrupted_call.hpp; x86_64), so no open or stat fails with
  /// EINTR that would not fail untraced.
  user_notification,
};

/// The mechanism run_traced uses when the request names none:
/// `user_notification` where the listener wakes on the caller's CPU (Linux
/// 6.6) and the tracer can restart interrupted calls (x86_64), else
/// `ptrace_stop`; the environment variable OPCACHE_TRACE_MECHANISM forces
/// `ptrace` or `notify`. Computed once per process from the environment and
/// the kernel's release (nothing is probed); thread-safe. Where the kernel
/// or a seccomp profile refuses a listener after all, run_traced falls back
/// to `ptrace_stop` (TraceOutcome says which ran).
TraceMechanism default_trace_mechanism();

/// A command to run under the tracer.
struct TraceRequest {
  std::vector<std::string> argv;           ///< argv[0] is searched in PATH as execvp(3) does
  int stdin_fd = -1;                       ///< the command's standard input; -1: this process's
  /// Called with each event as the tracer records it (each (path, access)
  /// pair once), on one of the tracer's threads while the command runs, one
  /// call at a time: a hook to start work on a file before the command ends
  /// (exec digests them). It must be quick and must not throw.
  std::function<void(const PathEvent&)> on_event;
  /// Forces a mechanism (tests, benchmarks); `user_notification` falls back
  /// to `ptrace_stop` where the kernel or a seccomp profile refuses a
  /// listener (TraceOutcome says which ran). std::nullopt: default_trace_mechanism().
  std::optional<TraceMechanism> mechanism;
  /// Under `user_notification` on x86_64, whether the dynamically linked
  /// programs of the tree run with the tracer's preload library
  /// (trace/preload_channel.hpp: their read-only look-ups reported without
  /// a notification each) where one is found. The events are the same;
  /// false: every call notified (tests, benchmarks).
  bool preload = true;
};

/// What the tracer saw.
struct TraceOutcome {
  /// The command's exit status (128 + the signal's number when a signal killed it).
  int status = 0;
  /// Each (path, access) pair once, in the order the tree first did it,
  /// across every process of the tree. Paths under /proc, /sys and /dev are
  /// left out.
  std::vector<PathEvent> events;
  /// Set when the tracer could not see everything the tree did (a 32-bit or
  /// x32 program, a process that outlived the command, a system call it
  /// could not decode): a one-line reason. The command still ran to its end
  /// and `status` is its status, but `events` is incomplete and must not be
  /// used to decide what the command depends on.
  std::optional<std::string> blind;
  /// How the calls that name a file reached the tracer.
  TraceMechanism mechanism = TraceMechanism::ptrace_stop;
  /// How many calls the tracer stopped or was notified of (what tracing
  /// cost the command); the preload library's look-ups are not among them.
  std::size_t calls_handed = 0;
  /// Whether the tree ran with the preload library (TraceRequest::preload).
  bool preloaded = false;
};

/// Why this machine cannot trace commands (ptrace or seccomp refused: a
/// container's seccomp profile, Yama's ptrace_scope 3, a kernel without
/// SECCOMP_RET_TRACE, opcache itself run under strace -f), or std::nullopt
/// when it can. The answer is computed once per process (it traces a probe
/// child, /bin/true); thread-safe. run_traced does not need it: it says
/// so itself, before the command runs (is_tracing_refused).
std::optional<std::string> tracing_unavailable();

/// Whether `error`, returned by run_traced, means that this machine refused
/// to let the command be traced (nothing ran; run it untraced instead), as
/// opposed to a command that cannot be run at all.
bool is_tracing_refused(const Error& error);

/// Runs `request.argv` with this process's environment, working directory
/// and standard output and error (standard input as `request.stdin_fd` says),
/// traces its whole process tree until the command and every process it
/// started have ended, and returns what it saw. Errors: `usage` when the
/// program cannot be found or run (nothing ran); `io` when tracing could not
/// start (is_tracing_refused; nothing ran). A run in which not one of the
/// filter's stops reached the tracer (the root's own execve is one) comes
/// back `blind`. Every tracee is killed if
/// this process dies (PTRACE_O_EXITKILL). Not async-signal-safe; may be
/// called from any thread, one traced command per call. The tracing runs on
/// a thread of its own (ptrace ties tracees to one thread), so the children
/// the calling thread started for other reasons are neither waited for nor
/// reaped; under `user_notification`, a second thread answers the
/// notifications.
Result<TraceOutcome> run_traced(const TraceRequest& request);

}  // namespace opcache::trace
