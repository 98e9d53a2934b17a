#include "trace/traced_child.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <memory>
#include <optional>
#include <string_view>

#include "base/try.hpp"
#include "trace/notify_listener.hpp"
#include "trace/process_tracer.hpp"

extern char** environ;

namespace opcache::trace {

namespace {

// The step of the child's set-up that failed, as it reports it, or
// `listener`: the descriptor of its filter's listener, reported before it stops.
enum class ChildStep : int { trace_me = 1, standard_input, no_new_privs, seccomp_filter, exec, listener };

struct ChildReport {
  ChildStep step;
  int value;  ///< the errno value of the failed step, or the listener's descriptor
};

const char* step_name(ChildStep step) {
  switch (step) {
    case ChildStep::trace_me:
      return "ptrace(PTRACE_TRACEME)";
    case ChildStep::standard_input:
      return "dup2 of its standard input";
    case ChildStep::no_new_privs:
      return "prctl(PR_SET_NO_NEW_PRIVS)";
    case ChildStep::seccomp_filter:
      return "seccomp(SECCOMP_SET_MODE_FILTER)";
    case ChildStep::exec:
      return "execve";
    case ChildStep::listener:
      return "the seccomp listener";
  }
  return "?";
}

// The child's calls are system calls made directly (syscall(2)), not the C
// library's functions: a sanitizer's runtime intercepts those and keeps
// per-thread state in them, which is the parent thread's in a child that
// shares its memory (and _exit would run the runtime's end-of-process work).

// Reports `step` and `value` through `fd`.
void send_report(int fd, ChildStep step, int value) noexcept {
  const ChildReport report{step, value};
  ::syscall(SYS_write, fd, &report, sizeof report);
}

// Reports `step` and errno through `fd` and ends the child.
[[noreturn]] void report_and_exit(int fd, ChildStep step, int error_number) noexcept {
  send_report(fd, step, error_number);
  ::syscall(SYS_exit_group, 127);
  __builtin_unreachable();
}

pid_t wait_for_traced_child(pid_t pid, int& status) {
  pid_t got = 0;
  do {
    got = ::waitpid(pid, &status, __WALL);
  } while (got < 0 && errno == EINTR);
  return got;
}

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  wait_for_traced_child(pid, status);
}

// The report waiting in the pipe `fd` now, if a whole one is.
std::optional<ChildReport> waiting_report(int fd) {
  pollfd readable{fd, POLLIN, 0};
  ChildReport report{};
  if (::poll(&readable, 1, 0) != 1 || ::read(fd, &report, sizeof report) != static_cast<ssize_t>(sizeof report)) {
    return std::nullopt;
  }
  return report;
}

constexpr std::string_view k_refused_prefix = "cannot trace ";

// Whether the traced child shares this process's memory until its execve
// (clone_child). Not under a sanitizer, whose runtime keeps state the child
// would run on: ThreadSanitizer's clone interceptor runs a fork child's
// hooks in the child, marking the shared runtime as a forked child's (this
// process then dies at its next thread), and AddressSanitizer reports the
// child's stack, which is none it knows, at every call that does not return.
#if defined(__has_feature)
#define OPCACHE_TRACED_CHILD_HAS_FEATURE(name) __has_feature(name)
#else
#define OPCACHE_TRACED_CHILD_HAS_FEATURE(name) 0
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || \
    OPCACHE_TRACED_CHILD_HAS_FEATURE(thread_sanitizer) || OPCACHE_TRACED_CHILD_HAS_FEATURE(address_sanitizer)
constexpr bool k_child_shares_memory = false;
#else
constexpr bool k_child_shares_memory = true;
#endif

}  // namespace

Error refused_tracing(const std::string& program, const std::string& why) {
  return Error::io(std::string(k_refused_prefix) + program + ": " + why);
}

bool is_tracing_refused(const Error& error) {
  return error.code() == ErrorCode::io && error.message().starts_with(k_refused_prefix);
}

TracedChild::TracedChild(std::string program, std::vector<std::string> argv, int stdin_fd, TraceMechanism mechanism,
                         const PreloadChannel* preload)
    : m_program(std::move(program)), m_arguments(std::move(argv)), m_stdin_fd(stdin_fd) {
  const bool preloaded = preload != nullptr && mechanism == TraceMechanism::user_notification;
  m_filter.emplace(mechanism, preloaded);
  for (auto& argument : m_arguments) {
    m_argv.push_back(argument.data());
  }
  m_argv.push_back(nullptr);
  if (preloaded) {
    for (const auto& variable : preload->child_environment()) {
      m_environment.push_back(const_cast<char*>(variable.c_str()));
    }
    m_environment.push_back(nullptr);
    m_preload_fd = preload->child_descriptor();
  }
}

void TracedChild::run_child() const noexcept {
  const int report = m_report_write.get();
  if (::syscall(SYS_ptrace, PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
    report_and_exit(report, ChildStep::trace_me, errno);
  }
  if (m_stdin_fd >= 0 && m_stdin_fd != STDIN_FILENO && ::syscall(SYS_dup3, m_stdin_fd, STDIN_FILENO, 0) < 0) {
    report_and_exit(report, ChildStep::standard_input, errno);
  }
  if (::syscall(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    report_and_exit(report, ChildStep::no_new_privs, errno);
  }
  if (m_preload_fd >= 0) {
    // Kept across execve. Where it fails (a descriptor limit under 701),
    // the library finds no channel there and every call is notified.
    ::syscall(SYS_dup3, m_preload_fd, PreloadChannel::child_descriptor_number(), 0);
  }
  // Installed before the stop: no call until execve is one it hands the
  // tracer, and a listener must be taken while this process still holds it.
  int listener = -1;
  if (const int error_number = m_filter->install(listener); error_number != 0) {
    report_and_exit(report, ChildStep::seccomp_filter, error_number);
  }
  if (listener >= 0) {
    send_report(report, ChildStep::listener, listener);
  }
  // kill(2) of its own pid, not raise(3): glibc's raise reads the calling
  // thread's descriptor, which is the parent's (the child shares its memory).
  ::syscall(SYS_kill, ::syscall(SYS_getpid), SIGSTOP);  // the tracer sets its options (and takes the listener) meanwhile
  ::syscall(SYS_execve, m_program.c_str(), m_argv.data(), m_environment.empty() ? environ : m_environment.data());
  report_and_exit(report, ChildStep::exec, errno);
}

int TracedChild::enter_child(void* self) noexcept {
  static_cast<const TracedChild*>(self)->run_child();
}

pid_t TracedChild::clone_child() {
  if (!k_child_shares_memory) {  // a sanitizer's build
    const pid_t pid = ::fork();
    if (pid == 0) {
      run_child();
    }
    return pid;
  }
  // As posix_spawn does: the child shares this process's memory until its
  // execve (CLONE_VM), on a stack of its own, so that no page table is
  // copied and this process's threads take no copy-on-write faults after
  // it. Not CLONE_VFORK: the child stops before its execve, and the
  // execve waits for the tracer's answer. Until the child's first stop
  // this object is left as it is: the child reads it.
  if (!m_child_stack) {
    m_child_stack = std::make_unique_for_overwrite<std::byte[]>(k_child_stack_size);
  }
  return ::clone(&TracedChild::enter_child, m_child_stack.get() + k_child_stack_size, CLONE_VM | SIGCHLD,
                 const_cast<TracedChild*>(this));
}

Status TracedChild::wait_for_first_stop(pid_t pid) {
  int status = 0;
  const pid_t waited = wait_for_traced_child(pid, status);
  const int wait_error = errno;
  // The child has stopped or ended: it no longer reads this object, and
  // its report, if any, is in the pipe (failure() reads it to the end).
  m_report_write.reset();
  if (waited != pid) {
    return Error::io("cannot wait for the traced child of " + m_program + ": " + std::strerror(wait_error));
  }
  if (!WIFSTOPPED(status)) {
    return failure();
  }
  if (WSTOPSIG(status) != SIGSTOP) {
    kill_and_reap(pid);
    return Error::io("the traced child of " + m_program + " stopped with signal " + std::to_string(WSTOPSIG(status)) +
                     " instead of SIGSTOP");
  }
  return {};
}

std::optional<base::FileDescriptor> TracedChild::take_listener(pid_t pid) const {
  const auto report = waiting_report(m_report_read.get());
  if (!report || report->step != ChildStep::listener) {
    return std::nullopt;
  }
  // The child is stopped and not reaped: `pid` is still its own.
  auto listener = take_descriptor(pid, report->value);
  if (!listener.valid()) {
    return std::nullopt;
  }
  return listener;
}

Result<StartedChild> TracedChild::start(int ptrace_options) {
  OPCACHE_TRY_ASSIGN(auto started, start_once(ptrace_options));
  if (started) {
    return std::move(*started);
  }
  m_filter.emplace(TraceMechanism::ptrace_stop);
  m_environment.clear();  // nothing would read the preload library's records
  m_preload_fd = -1;
  OPCACHE_TRY_ASSIGN(auto fallback, start_once(ptrace_options));
  return std::move(*fallback);  // a ptrace_stop start has no listener to miss
}

Result<std::optional<StartedChild>> TracedChild::start_once(int ptrace_options) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Error::io(std::string("cannot create a pipe to start a traced command: ") + std::strerror(errno));
  }
  m_report_read = base::FileDescriptor(fds[0]);
  m_report_write = base::FileDescriptor(fds[1]);
  if (fds[0] == PreloadChannel::child_descriptor_number() || fds[1] == PreloadChannel::child_descriptor_number()) {
    m_environment.clear();  // the channel's number is taken: this child runs without the library
    m_preload_fd = -1;
  }
  const pid_t pid = clone_child();
  if (pid < 0) {
    m_report_write.reset();
    return Error::io("cannot start a process to run " + m_program + ": " + std::strerror(errno));
  }
  if (auto stopped = wait_for_first_stop(pid); !stopped) {
    if (mechanism() == TraceMechanism::user_notification && is_tracing_refused(stopped.error())) {
      return std::optional<StartedChild>();  // a listener's filter refused: ptrace stops may still be allowed
    }
    return stopped.error();
  }
  StartedChild started{pid, {}};
  if (mechanism() == TraceMechanism::user_notification) {
    auto listener = take_listener(pid);
    if (!listener) {
      kill_and_reap(pid);
      return std::optional<StartedChild>();
    }
    started.listener = std::move(*listener);
  }
  if (::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(ptrace_options))) != 0 ||
      ::ptrace(PTRACE_CONT, pid, nullptr, nullptr) != 0) {
    const int error_number = errno;
    kill_and_reap(pid);
    return refused_tracing(m_program, std::string("ptrace(PTRACE_SETOPTIONS): ") + std::strerror(error_number));
  }
  return std::optional<StartedChild>(std::move(started));
}

Error TracedChild::failure() const {
  ChildReport report{};
  ssize_t got = 0;
  do {
    got = ::read(m_report_read.get(), &report, sizeof report);
  } while ((got < 0 && errno == EINTR) ||
           (got == static_cast<ssize_t>(sizeof report) && report.step == ChildStep::listener));
  if (got != static_cast<ssize_t>(sizeof report)) {
    return Error::io("the traced child of " + m_program + " ended before it ran the program");
  }
  const std::string reason = std::string(step_name(report.step)) + ": " + std::strerror(report.value);
  if (report.step == ChildStep::exec || report.step == ChildStep::standard_input) {
    return Error::usage("cannot run " + m_program + ": " + reason);
  }
  return refused_tracing(m_program, reason);
}

}  // namespace opcache::trace
