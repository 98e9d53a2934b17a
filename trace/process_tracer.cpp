#include "trace/process_tracer.hpp"

#include <signal.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "base/mutex.hpp"
#include "base/program_search.hpp"
#include "base/try.hpp"
#include "trace/access_classifier.hpp"
#include "trace/event_log.hpp"
#include "trace/interrupted_call.hpp"
#include "trace/notify_listener.hpp"
#include "trace/preload_channel.hpp"
#include "trace/syscall_table.hpp"
#include "trace/traced_child.hpp"
#include "trace/tracee_paths.hpp"

namespace opcache::trace {

namespace {

constexpr int k_tracer_options = PTRACE_O_TRACESECCOMP | PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK |
                                 PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL;

// execvp(3)'s search path when PATH is not set.
constexpr const char* k_default_search_path = "/bin:/usr/bin";

// Forces a mechanism: "ptrace" or "notify" (default_trace_mechanism).
constexpr const char* k_mechanism_variable = "OPCACHE_TRACE_MECHANISM";

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

// The EventLog of one traced command, written by the thread that follows
// its tree and, under user_notification, by its listener's thread.
class SharedLog {
 public:
  explicit SharedLog(std::function<void(const PathEvent&)> observer) : m_log(std::move(observer)) {}

  // EventLog::ignore, before either thread writes.
  void ignore(std::string path) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    m_log.ignore(std::move(path));
  }

  // classify_syscall into the log.
  void classify(const SyscallStop& stop) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    classify_syscall(stop, m_log);
  }

  // An event the preload library reported.
  void add(const PathEvent& event) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    m_log.add(event.path, event.access, event.identity);
  }

  // EventLog::set_blind: the first reason given, by either thread, is kept.
  void set_blind(std::string reason) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    m_log.set_blind(std::move(reason));
  }

  // EventLog::move_into, once both threads are done.
  void move_into(TraceOutcome& outcome) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    m_log.move_into(outcome);
  }

 private:
  base::Mutex m_mutex;
  EventLog m_log GUARDED_BY(m_mutex);
};

// The waitpid loop of one traced command, on the thread that is the tracer
// of its whole tree.
class TraceSession {
 public:
  // `received`: the listener's record under user_notification, nullptr under ptrace_stop.
  TraceSession(pid_t root, SharedLog& log, ReceivedCalls* received) : m_root(root), m_log(log), m_received(received) {
    m_tracees.emplace(root, Tracee{true, true});
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

  // The root's exit status, once run() returned.
  int root_status() const { return m_root_status; }

  // How many seccomp stops the tree made.
  std::size_t seccomp_stops() const { return m_seccomp_stops; }

 private:
  void on_ended(pid_t tid, int status) {
    const auto tracee = m_tracees.find(tid);
    if (tracee == m_tracees.end() || !tracee->second.announced) {
      m_ended_unannounced.insert(tid);
    }
    if (tracee != m_tracees.end()) {
      m_tracees.erase(tracee);
    }
    if (m_received != nullptr) {
      m_received->forget(tid);
    }
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
      m_log.classify(**stop);
    }
    resume_tracee(tid, 0);
  }

  void on_ptrace_event(pid_t tid, int event) {
    if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK || event == PTRACE_EVENT_CLONE) {
      on_created(static_cast<pid_t>(event_message(tid)));
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

  // The creator's event of tracee `tid`, which may come after the new
  // tracee's first stop, or even after its end (then it is not tracked again).
  void on_created(pid_t tid) {
    if (m_ended_unannounced.erase(tid) == 0) {
      m_tracees[tid].announced = true;
    }
  }

  void on_signal_stop(pid_t tid, int signal) {
    // Unknown: a new tracee whose creator's event is still to come.
    auto& tracee = m_tracees[tid];
    const bool first_stop = !tracee.stopped;
    tracee.stopped = true;
    if (first_stop && signal == SIGSTOP) {
      return resume_tracee(tid, 0);  // a new tracee's initial stop
    }
    if (is_stopping_signal(signal) && in_group_stop(tid)) {
      return resume_tracee(tid, 0);  // job control is not kept under the tracer
    }
    restart_if_never_received(tid);
    resume_tracee(tid, signal);
  }

  // Under user_notification: a traced call that the signal about to be
  // delivered to `tid` interrupted before the listener received it runs
  // again once the handler has run (trace/interrupted_call.hpp).
  void restart_if_never_received(pid_t tid) {
    if (m_received == nullptr) {
      return;
    }
    const auto call = interrupted_call(tid);
    if (!call) {
      return;
    }
    if (!m_received->take_if_received(tid, *call) && find_syscall_rule(call->number) != nullptr) {
      restart_interrupted_call(tid);
    }
  }

  // What the loop knows of a live tracee.
  struct Tracee {
    bool stopped = false;    ///< it has had its initial stop
    bool announced = false;  ///< its creator's event has come (the root: always)
  };

  pid_t m_root;
  std::unordered_map<pid_t, Tracee> m_tracees;    ///< live tracees
  std::unordered_set<pid_t> m_ended_unannounced;  ///< tracees that ended before their creator's event came
  bool m_root_started = false;
  int m_root_status = -1;
  std::size_t m_seccomp_stops = 0;
  SharedLog& m_log;
  ReceivedCalls* m_received;
};

// Answers the notifications of `started`'s listener, when it has one, into
// `log`, each recorded in `received` first: nullptr under ptrace_stop. The
// records of `channel` (when set) are read into `log` first.
Result<std::unique_ptr<NotifyListener>> listen_to(StartedChild& started, SharedLog& log, ReceivedCalls& received,
                                                  const PreloadChannel* channel) {
  if (!started.listener.valid()) {
    return std::unique_ptr<NotifyListener>();
  }
  NotifyListener::SideChannel side;
  if (channel != nullptr) {
    side = [channel, &log] {
      channel->receive_waiting([&log](const PathEvent& event) { log.add(event); },
                               [&log](std::string reason) { log.set_blind(std::move(reason)); });
    };
  }
  return NotifyListener::start(
      std::move(started.listener),
      [&log, &received](const SyscallStop& stop) {
        received.record(stop);
        log.classify(stop);
      },
      std::move(side));
}

// The preload library's channel for one command, when it is to run with it.
std::optional<PreloadChannel> preload_channel_for(const TraceRequest& request, TraceMechanism mechanism) {
  if (!request.preload || mechanism != TraceMechanism::user_notification || !preload_library()) {
    return std::nullopt;
  }
  return PreloadChannel::open(*preload_library());
}

// Stops `listener` (the tree has ended) and returns how many notifications
// it answered; a failure of its thread makes `log` blind.
std::size_t finish_listening(NotifyListener& listener, SharedLog& log) {
  if (auto finished = listener.finish(); !finished) {
    log.set_blind(finished.error().message());
  }
  return listener.notifications();
}

TraceOutcome outcome_of(SharedLog& log, int status, std::size_t calls_handed, TraceMechanism mechanism,
                        bool preloaded) {
  if (calls_handed == 0) {
    // The root's own execve is handed to the tracer: without it, the filter's stops go elsewhere.
    log.set_blind("the seccomp filter's stops do not reach the tracer (the command's execve ran unseen)");
  }
  TraceOutcome outcome;
  outcome.status = status;
  outcome.mechanism = mechanism;
  outcome.calls_handed = calls_handed;
  outcome.preloaded = preloaded;
  log.move_into(outcome);
  return outcome;
}

// Runs `program` traced on the calling thread, which becomes the tracer;
// under user_notification, a thread of the listener's answers the calls
// that name a file meanwhile.
Result<TraceOutcome> trace_on_this_thread(const std::string& program, const TraceRequest& request,
                                          TraceMechanism mechanism) {
  auto channel = preload_channel_for(request, mechanism);
  TracedChild child(program, request.argv, request.stdin_fd, mechanism, channel ? &*channel : nullptr);
  OPCACHE_TRY_ASSIGN(auto started, child.start(k_tracer_options));
  if (channel) {
    channel->close_child_end();  // the child has its own: the socket ends with the tree
    if (!child.preloaded()) {
      channel.reset();
    }
  }
  SharedLog log(request.on_event);
  if (channel) {
    log.ignore(*preload_library());
  }
  ReceivedCalls received;
  TraceSession session(started.pid, log, started.listener.valid() ? &received : nullptr);
  auto listener = listen_to(started, log, received, channel ? &*channel : nullptr);
  if (!listener) {
    ::kill(started.pid, SIGKILL);  // blocked in its execve, which nothing would answer
    (void)session.run();
    return listener.error();
  }
  const Status traced = session.run();
  const std::size_t notified = *listener ? finish_listening(**listener, log) : 0;
  OPCACHE_TRY(traced);
  if (!session.root_started()) {
    return child.failure();
  }
  return outcome_of(log, session.root_status(), session.seccomp_stops() + notified, child.mechanism(),
                    channel.has_value());
}

// Runs `program` traced on a thread of its own: ptrace ties tracees to one
// tracer thread, and waiting for "any tracee" on it must not reap the
// children the caller's thread started for other reasons. When the thread
// ends, PTRACE_O_EXITKILL kills any tracee left.
Result<TraceOutcome> trace_on_own_thread(const std::string& program, const TraceRequest& request,
                                         TraceMechanism mechanism) {
  Result<TraceOutcome> result = Error::internal("the tracing thread did not run");
  try {
    std::thread tracer([&] {
      try {
        result = trace_on_this_thread(program, request, mechanism);
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
  auto outcome = trace_on_own_thread(program->string(), request, default_trace_mechanism());
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

// The mechanism OPCACHE_TRACE_MECHANISM names, when it names one.
std::optional<TraceMechanism> mechanism_in_environment() {
  const char* value = std::getenv(k_mechanism_variable);
  if (value == nullptr) {
    return std::nullopt;
  }
  const std::string_view name(value);
  if (name == "ptrace") {
    return TraceMechanism::ptrace_stop;
  }
  if (name == "notify") {
    return TraceMechanism::user_notification;
  }
  return std::nullopt;
}

TraceMechanism choose_default_mechanism() {
  if (const auto forced = mechanism_in_environment()) {
    return *forced;  // notifications where there are none: TracedChild::start falls back to ptrace stops
  }
  // User notifications where the listener wakes on the caller's CPU (Linux 6.6: 5.4 against 14.6
  // us a call under ptrace stops, 2 vCPUs) and the tracer can restart the calls a signal
  // interrupts before the listener receives them (x86_64: trace/interrupted_call.hpp); ptrace
  // stops elsewhere, where a listener is slower than a stop or such a call would fail with EINTR.
  // The kernel's release decides, not a probe: a listener refused after all costs a start under
  // notifications (TracedChild::start then starts the command under ptrace stops).
  if (release_wakes_synchronously() && can_restart_interrupted_calls()) {
    return TraceMechanism::user_notification;
  }
  return TraceMechanism::ptrace_stop;
}

}  // namespace

TraceMechanism default_trace_mechanism() {
  static const TraceMechanism mechanism = choose_default_mechanism();
  return mechanism;
}

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
  const auto mechanism = request.mechanism ? *request.mechanism : default_trace_mechanism();
  return trace_on_own_thread(program->string(), request, mechanism);
}

}  // namespace opcache::trace
