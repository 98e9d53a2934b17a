#include "trace/process_tracer.hpp"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "base/program_search.hpp"
#include "base/try.hpp"
#include "trace/access_classifier.hpp"
#include "trace/event_log.hpp"
#include "trace/syscall_table.hpp"
#include "trace/traced_child.hpp"
#include "trace/tracee_paths.hpp"

namespace opcache::trace {

namespace {

constexpr int k_tracer_options = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                                 PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;

// execvp(3)'s search path when PATH is not set.
constexpr const char* k_default_search_path = "/bin:/usr/bin";

int exit_status_of(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool is_stopping_signal(int signal) {
  return signal == SIGSTOP || signal == SIGTSTP || signal == SIGTTIN || signal == SIGTTOU;
}

// Whether tracee `tid`, reported stopped by a stopping signal, is in a group
// stop (the signal already delivered) rather than a signal-delivery stop.
bool in_group_stop(pid_t tid) {
  siginfo_t info{};
  return ::ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) != 0 && errno == EINVAL;
}

void resume_tracee(pid_t tid, int signal) {
  ::ptrace(PTRACE_CONT, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(signal)));  // ESRCH: gone
}

unsigned long event_message(pid_t tid) {
  unsigned long message = 0;
  ::ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &message);
  return message;
}

// The waitpid loop of one traced command, on the thread that is the tracer
// of its whole tree.
class TraceSession {
 public:
  TraceSession(pid_t root, std::function<void(const PathEvent&)> observer) : m_root(root), m_log(std::move(observer)) {
    m_tracees.emplace(root, true);
  }

  // Follows the tree until every tracee has ended.
  Status run() {
    while (true) {
      int status = 0;
      // __WNOTHREAD: this thread's children and tracees only, never those of
      // the caller's other threads.
      const pid_t tid = ::waitpid(-1, &status, __WALL | __WNOTHREAD);
      if (tid < 0) {
        if (errno == EINTR) {
          continue;
        }
        if (errno == ECHILD) {
          return {};
        }
        return Error::io(std::string("cannot wait for the traced command: ") + std::strerror(errno));
      }
      if (WIFSTOPPED(status)) {
        on_stopped(tid, status);
      } else {
        on_ended(tid, status);
      }
    }
  }

  // Whether the root ran the program (its execve succeeded).
  bool root_started() const { return m_root_started; }

  TraceOutcome outcome() {
    if (m_seccomp_stops == 0) {
      // The root's own execve stops under the filter: without that stop, the filter's stops go elsewhere.
      m_log.set_blind("the seccomp filter's stops do not reach the tracer (the command's execve ran unseen)");
    }
    TraceOutcome outcome;
    outcome.status = m_root_status;
    m_log.move_into(outcome);
    return outcome;
  }

 private:
  void on_ended(pid_t tid, int status) {
    m_tracees.erase(tid);
    if (tid != m_root) {
      return;
    }
    m_root_status = exit_status_of(status);
    if (!m_tracees.empty()) {
      m_log.set_blind(describe_tracee(m_tracees.begin()->first) + " outlived the command");
    }
  }

  void on_stopped(pid_t tid, int status) {
    const int signal = WSTOPSIG(status);
    const int event = status >> 16;
    if (signal == SIGTRAP && event == PTRACE_EVENT_SECCOMP) {
      return on_seccomp_stop(tid);
    }
    if (signal == SIGTRAP && event != 0) {
      return on_ptrace_event(tid, event);
    }
    on_signal_stop(tid, signal);
  }

  void on_seccomp_stop(pid_t tid) {
    ++m_seccomp_stops;
    const auto stop = read_syscall_stop(tid);
    if (!stop) {
      m_log.set_blind(stop.error().message());
    } else if (!*stop) {
      return;  // killed meanwhile
    } else {
      classify_syscall(**stop, m_log);
    }
    resume_tracee(tid, 0);
  }

  void on_ptrace_event(pid_t tid, int event) {
    if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
      m_tracees.try_emplace(static_cast<pid_t>(event_message(tid)), false);
    } else if (event == PTRACE_EVENT_EXEC) {
      // A thread other than the leader that runs execve takes the leader's
      // id; its own disappears without a report.
      const auto former = static_cast<pid_t>(event_message(tid));
      if (former != tid) {
        m_tracees.erase(former);
      }
      m_root_started = m_root_started || tid == m_root;
    }
    resume_tracee(tid, 0);
  }

  void on_signal_stop(pid_t tid, int signal) {
    // Unknown: a new tracee whose creator's event is still to come.
    const auto tracee = m_tracees.try_emplace(tid, false).first;
    const bool first_stop = !tracee->second;
    tracee->second = true;
    if (first_stop && signal == SIGSTOP) {
      return resume_tracee(tid, 0);  // a new tracee's initial stop
    }
    if (is_stopping_signal(signal) && in_group_stop(tid)) {
      return resume_tracee(tid, 0);  // job control is not kept under the tracer
    }
    resume_tracee(tid, signal);
  }

  pid_t m_root;
  std::unordered_map<pid_t, bool> m_tracees;  ///< live tracees → whether each has had its initial stop
  bool m_root_started = false;
  int m_root_status = -1;
  std::size_t m_seccomp_stops = 0;
  EventLog m_log;
};

// Runs `program` traced on the calling thread, which becomes the tracer.
Result<TraceOutcome> trace_on_this_thread(const std::string& program, const TraceRequest& request) {
  TracedChild child(program, request.argv, request.stdin_fd);
  OPCACHE_TRY_ASSIGN(const pid_t root, child.start(k_tracer_options));
  TraceSession session(root, request.on_event);
  OPCACHE_TRY(session.run());
  if (!session.root_started()) {
    return child.failure();
  }
  return session.outcome();
}

// Runs `program` traced on a thread of its own: ptrace ties tracees to one
// tracer thread, and waiting for "any tracee" on it must not reap the
// children the caller's thread started for other reasons. When the thread
// ends, PTRACE_O_EXITKILL kills any tracee left.
Result<TraceOutcome> trace_on_own_thread(const std::string& program, const TraceRequest& request) {
  Result<TraceOutcome> result = Error::internal("the tracing thread did not run");
  try {
    std::thread tracer([&] {
      try {
        result = trace_on_this_thread(program, request);
      } catch (const std::exception& exception) {
        result = Error::internal(std::string("tracing failed: ") + exception.what());
      }
    });
    tracer.join();
  } catch (const std::system_error& error) {
    return Error::io(std::string("cannot start a thread to trace ") + program + ": " + error.what());
  }
  return result;
}

std::optional<std::string> probe_tracing() {
  const auto program = base::find_program("true", k_default_search_path, base::EmptyPathEntry::skipped);
  if (!program) {
    return "cannot find the program true in " + std::string(k_default_search_path) + " to probe tracing with";
  }
  TraceRequest request;
  request.argv = {program->string()};
  auto outcome = trace_on_own_thread(program->string(), request);
  if (!outcome) {
    return outcome.error().message();
  }
  if (outcome->blind) {
    return *outcome->blind;
  }
  const auto expected = normal_path(std::filesystem::absolute(*program).string());
  for (const auto& event : outcome->events) {
    if (event.path == expected && event.access == Access::executed) {
      return std::nullopt;
    }
  }
  return "the seccomp filter's stops do not reach the tracer (" + expected + " ran unseen)";
}

}  // namespace

std::optional<std::string> tracing_unavailable() {
  static std::once_flag once;
  static std::optional<std::string> reason;
  std::call_once(once, [] { reason = probe_tracing(); });
  return reason;
}

Result<TraceOutcome> run_traced(const TraceRequest& request) {
  if (request.argv.empty() || request.argv.front().empty()) {
    return Error::usage("no command to trace");
  }
  const char* search_path = std::getenv("PATH");
  const auto program = base::find_program(request.argv.front(), search_path ? search_path : k_default_search_path,
                                          base::EmptyPathEntry::current_directory);
  if (!program) {
    return Error::usage("cannot run \"" + request.argv.front() + "\": no such program in PATH");
  }
  return trace_on_own_thread(program->string(), request);
}

}  // namespace opcache::trace
