#include "trace/traced_child.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <string_view>

#include "trace/process_tracer.hpp"

extern char** environ;

namespace opcache::trace {

namespace {

// The step of the child's set-up that failed, as it reports it.
enum class ChildStep : int { trace_me = 1, standard_input, no_new_privs, seccomp_filter, exec };

struct ChildReport {
  ChildStep step;
  int error_number;
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
  }
  return "?";
}

// Async-signal-safe: reports `step` and errno through `fd` and exits.
[[noreturn]] void report_and_exit(int fd, ChildStep step, int error_number) noexcept {
  const ChildReport report{step, error_number};
  [[maybe_unused]] const ssize_t written = ::write(fd, &report, sizeof report);
  ::_exit(127);
}

pid_t wait_for_traced_child(pid_t pid, int& status) {
  pid_t got = 0;
  do {
    got = ::waitpid(pid, &status, __WALL);
  } while (got < 0 && errno == EINTR);
  return got;
}

constexpr std::string_view k_refused_prefix = "cannot trace ";

}  // namespace

Error refused_tracing(const std::string& program, const std::string& why) {
  return Error::io(std::string(k_refused_prefix) + program + ": " + why);
}

bool is_tracing_refused(const Error& error) {
  return error.code() == ErrorCode::io && error.message().starts_with(k_refused_prefix);
}

TracedChild::TracedChild(std::string program, std::vector<std::string> argv, int stdin_fd)
    : m_program(std::move(program)), m_arguments(std::move(argv)), m_stdin_fd(stdin_fd) {
  for (auto& argument : m_arguments) {
    m_argv.push_back(argument.data());
  }
  m_argv.push_back(nullptr);
}

void TracedChild::run_child() const noexcept {
  const int report = m_report_write.get();
  if (::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) {
    report_and_exit(report, ChildStep::trace_me, errno);
  }
  if (m_stdin_fd >= 0 && m_stdin_fd != STDIN_FILENO && ::dup2(m_stdin_fd, STDIN_FILENO) < 0) {
    report_and_exit(report, ChildStep::standard_input, errno);
  }
  ::raise(SIGSTOP);  // the tracer sets its options meanwhile
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    report_and_exit(report, ChildStep::no_new_privs, errno);
  }
  if (const int error_number = m_filter.install(); error_number != 0) {
    report_and_exit(report, ChildStep::seccomp_filter, error_number);
  }
  ::execve(m_program.c_str(), m_argv.data(), environ);
  report_and_exit(report, ChildStep::exec, errno);
}

Status TracedChild::wait_for_first_stop(pid_t pid) const {
  int status = 0;
  if (wait_for_traced_child(pid, status) != pid) {
    return Error::io("cannot wait for the traced child of " + m_program + ": " + std::strerror(errno));
  }
  if (!WIFSTOPPED(status)) {
    return failure();
  }
  if (WSTOPSIG(status) != SIGSTOP) {
    ::kill(pid, SIGKILL);
    wait_for_traced_child(pid, status);
    return Error::io("the traced child of " + m_program + " stopped with signal " + std::to_string(WSTOPSIG(status)) +
                     " instead of SIGSTOP");
  }
  return {};
}

Result<pid_t> TracedChild::start(int ptrace_options) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return Error::io(std::string("cannot create a pipe to start a traced command: ") + std::strerror(errno));
  }
  m_report_read = base::FileDescriptor(fds[0]);
  m_report_write = base::FileDescriptor(fds[1]);
  const pid_t pid = ::fork();
  if (pid < 0) {
    return Error::io("cannot fork to run " + m_program + ": " + std::strerror(errno));
  }
  if (pid == 0) {
    run_child();
  }
  m_report_write.reset();
  if (auto stopped = wait_for_first_stop(pid); !stopped) {
    return stopped.error();
  }
  if (::ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(static_cast<long>(ptrace_options))) != 0 ||
      ::ptrace(PTRACE_CONT, pid, nullptr, nullptr) != 0) {
    const int error_number = errno;
    ::kill(pid, SIGKILL);
    int status = 0;
    wait_for_traced_child(pid, status);
    return refused_tracing(m_program, std::string("ptrace(PTRACE_SETOPTIONS): ") + std::strerror(error_number));
  }
  return pid;
}

Error TracedChild::failure() const {
  ChildReport report{};
  ssize_t got = 0;
  do {
    got = ::read(m_report_read.get(), &report, sizeof report);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof report)) {
    return Error::io("the traced child of " + m_program + " ended before it ran the program");
  }
  const std::string reason = std::string(step_name(report.step)) + ": " + std::strerror(report.error_number);
  if (report.step == ChildStep::exec || report.step == ChildStep::standard_input) {
    return Error::usage("cannot run " + m_program + ": " + reason);
  }
  return refused_tracing(m_program, reason);
}

}  // namespace opcache::trace
