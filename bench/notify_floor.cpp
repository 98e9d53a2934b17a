// bench_notify_floor: the least the tracer's mechanism costs a command, for
// bench/run's miss scenario to put beside bench_trace_floor and the traced
// miss.
//
//   bench_notify_floor [--count] CMD ARGS...
//
// The command runs under the seccomp filter a traced miss runs under
// (trace::SeccompFilter, user notifications, the preload library's page let
// through) with the preload library and its channel, as trace::run_traced
// starts it; the tracer's own listener (trace::NotifyListener) answers every
// notified call "continue" at once, unread. What it leaves out is everything
// the tracer does beyond the kernel's round trips: ptrace (the tree's forks,
// execs and exits, and the thread that follows them), reading and
// classifying each call, the library's records (left in the socket). Its
// time against the command alone is what the mechanism itself costs on this
// machine; bench_trace_floor's, what the tracer costs. With --count, prints
// how many calls it answered on stderr.
// Exits with the command's status, 2 when it cannot start it.
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "trace/notify_listener.hpp"
#include "trace/preload_channel.hpp"
#include "trace/seccomp_filter.hpp"

namespace {

using opcache::trace::NotifyListener;
using opcache::trace::PreloadChannel;
using opcache::trace::SeccompFilter;
using opcache::trace::TraceMechanism;

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "bench_notify_floor: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(2);
}

// The child: the channel at its number, the filter, the listener's number
// reported through `report`, then the command (its execve already notified).
[[noreturn]] void run_child(const SeccompFilter& filter, const PreloadChannel* channel, int report, char** argv,
                            char** environment) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    ::_exit(126);
  }
  if (channel != nullptr) {
    ::dup2(channel->child_descriptor(), PreloadChannel::child_descriptor_number());
  }
  int listener = -1;
  if (filter.install(listener) != 0 || ::write(report, &listener, sizeof listener) != sizeof listener) {
    ::_exit(126);
  }
  ::execvpe(argv[0], argv, environment);
  ::_exit(127);
}

}  // namespace

int main(int argc, char** argv) {
  const bool count = argc > 1 && std::strcmp(argv[1], "--count") == 0;
  char** command = argv + (count ? 2 : 1);
  if (*command == nullptr) {
    std::fprintf(stderr, "usage: bench_notify_floor [--count] CMD ARGS...\n");
    return 2;
  }
  const auto& library = opcache::trace::preload_library();
  auto channel = library ? PreloadChannel::open(*library) : std::nullopt;
  std::vector<char*> environment;
  if (channel) {
    for (const auto& variable : channel->child_environment()) {
      environment.push_back(const_cast<char*>(variable.c_str()));
    }
  } else {
    for (char** variable = environ; *variable != nullptr; ++variable) {
      environment.push_back(*variable);
    }
  }
  environment.push_back(nullptr);
  const SeccompFilter filter(TraceMechanism::user_notification, channel.has_value());
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    fail("pipe2");
  }
  const pid_t child = ::fork();
  if (child < 0) {
    fail("fork");
  }
  if (child == 0) {
    run_child(filter, channel ? &*channel : nullptr, report[1], command, environment.data());
  }
  ::close(report[1]);
  int child_listener = -1;
  if (::read(report[0], &child_listener, sizeof child_listener) != sizeof child_listener || child_listener < 0) {
    errno = ECHILD;
    fail("the child could not install the filter");
  }
  auto listener = opcache::trace::take_descriptor(child, child_listener);
  if (!listener.valid()) {
    fail("pidfd_getfd of the listener");
  }
  if (channel) {
    channel->close_child_end();
  }
  auto answering = NotifyListener::start(std::move(listener), [](const opcache::trace::SyscallStop&) {}, {});
  if (!answering) {
    std::fprintf(stderr, "bench_notify_floor: %s\n", answering.error().message().c_str());
    return 2;
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  (void)(*answering)->finish();
  if (count) {
    std::fprintf(stderr, "answered %zu\n", (*answering)->notifications());
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
