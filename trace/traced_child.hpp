// Starting a command under the tracer: a child asks to be traced,
// installs the seccomp filter (and reports its listener's descriptor, under
// TraceMechanism::user_notification), stops until the tracer has set its
// options (and taken that listener) and runs the program. The child shares
// the caller's memory until its execve (clone with CLONE_VM, as
// posix_spawn; forked in a sanitizer's build): it makes only system calls
// and writes nothing but its own stack; everything it needs is prepared
// before it starts.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "opcache/result.hpp"
#include "trace/preload_channel.hpp"
#include "trace/seccomp_filter.hpp"

namespace opcache::trace {

/// The error for a system that refuses to let a command be traced:
/// `io`, "cannot trace <program>: <why>". is_tracing_refused knows it.
Error refused_tracing(const std::string& program, const std::string& why);

/// A child started under the tracer.
struct StartedChild {
  pid_t pid = -1;
  /// The seccomp listener of its filter, a descriptor of this process
  /// (O_CLOEXEC), under TraceMechanism::user_notification; invalid under
  /// `ptrace_stop`. Its first notification is the child's execve, which
  /// waits for an answer.
  base::FileDescriptor listener;
};

/// One command to start traced. Not thread-safe; one per command, used by
/// the thread that traces it (ptrace ties a tracee to one tracer thread).
class TracedChild {
 public:
  /// `program`: the file to execute (argv[0] already searched in PATH);
  /// `argv`: its arguments, argv[0] included; `stdin_fd`: its standard
  /// input (-1: this process's); `mechanism`: how its filter hands the
  /// tracer the calls that name a file; `preload`: under
  /// `user_notification`, the channel of the preload library the child
  /// runs with (its environment, its inherited socket, the filter's page
  /// let through), which must outlive start(); nullptr: none.
  TracedChild(std::string program, std::vector<std::string> argv, int stdin_fd, TraceMechanism mechanism,
              const PreloadChannel* preload = nullptr);
  TracedChild(const TracedChild&) = delete;
  TracedChild& operator=(const TracedChild&) = delete;

  /// Starts the child, waits for it to stop (its filter installed), takes
  /// its listener under `user_notification` (pidfd_getfd), makes the
  /// calling thread its tracer with `ptrace_options` (PTRACE_SETOPTIONS)
  /// and resumes it towards its execve, the first call its filter hands the
  /// tracer. When the listener cannot be made (its filter refused) or
  /// taken, that child is gone and another started under `ptrace_stop`
  /// (mechanism() says so). `io` when
  /// it cannot be started or traced (the child is then gone); a refusal to
  /// be traced is made by refused_tracing.
  Result<StartedChild> start(int ptrace_options);

  /// The mechanism of the child started last (or to be started).
  TraceMechanism mechanism() const noexcept { return m_filter->mechanism(); }

  /// Whether the child started last runs with the preload library (not
  /// after a fall back to `ptrace_stop`).
  bool preloaded() const noexcept { return m_preload_fd >= 0; }

  /// Why the child ended without running the program, once it has ended
  /// (it reports the step that failed before it exits): `usage` when
  /// execve refused the program or `stdin_fd` is not open, `io` made by
  /// refused_tracing when the system refused to let it be traced.
  Error failure() const;

 private:
  /// The child's side; never returns.
  [[noreturn]] void run_child() const noexcept;
  /// clone(2)'s entry: run_child() of the TracedChild `self`.
  [[noreturn]] static int enter_child(void* self) noexcept;
  /// Starts run_child() in a child sharing this process's memory, on
  /// m_child_stack; its pid, or -1 (errno).
  pid_t clone_child();
  /// start() with the current filter; std::nullopt when its listener could
  /// not be made or taken (the child is then gone).
  Result<std::optional<StartedChild>> start_once(int ptrace_options);
  /// Waits for the child's first stop (or end), then closes this
  /// process's end of the report pipe; an error unless it stopped on SIGSTOP.
  Status wait_for_first_stop(pid_t pid);
  /// The listener the stopped child `pid` reported, or std::nullopt.
  std::optional<base::FileDescriptor> take_listener(pid_t pid) const;

  std::string m_program;
  std::vector<std::string> m_arguments;
  std::vector<char*> m_argv;  ///< m_arguments' strings and a null pointer
  std::vector<char*> m_environment;  ///< the preload channel's environment and a null pointer; empty: environ
  int m_preload_fd = -1;             ///< the channel's descriptor the child duplicates for its execve; -1: none
  int m_stdin_fd;
  std::optional<SeccompFilter> m_filter;  ///< always set; replaced when falling back to ptrace stops
  base::FileDescriptor m_report_read;     ///< the child writes the step that failed, then exits
  base::FileDescriptor m_report_write;    ///< closed in the parent once started; O_CLOEXEC in the child
  static constexpr std::size_t k_child_stack_size = 256 * 1024;  ///< run_child's, sanitizers' frames included
  std::unique_ptr<std::byte[]> m_child_stack;  ///< the child's until its execve or exit; lives as long as this
};

}  // namespace opcache::trace
