// The calls a signal interrupts while they wait for the seccomp listener
// (TraceMechanism::user_notification), restarted as if the tracer were not
// there. Before the listener has received a notified call, the calling
// thread waits interruptibly: a signal makes the call return -ERESTARTSYS
// without running, which the kernel turns into EINTR when the signal's
// handler lacks SA_RESTART; an open(2) or stat(2) of a file never fails so
// untraced, and programs do not retry it. The tracer sees that return value
// at the thread's signal-delivery stop (ptrace still follows the tree) and,
// when the listener never received the call, makes it -ERESTARTNOINTR, which
// the kernel always restarts once the handler has run: the call is notified
// again and runs. A call the listener received runs whatever comes
// (SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV), so an -ERESTARTSYS it returns is
// its own (an open(2) of a FIFO that waited for a writer) and is left alone.
// x86_64 only: elsewhere can_restart_interrupted_calls() is false and the
// tracer keeps to ptrace stops by default.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "base/mutex.hpp"
#include "trace/syscall_table.hpp"

namespace opcache::trace {

/// What tells one system call from another of the same thread: its number,
/// its six arguments and where it was made.
struct CallSignature {
  std::uint64_t number = 0;
  std::array<std::uint64_t, 6> arguments{};
  std::uint64_t instruction_pointer = 0;
  bool operator==(const CallSignature&) const = default;
};

/// Whether this build can read and restart an interrupted call (x86_64).
bool can_restart_interrupted_calls();

/// The native call that tracee `tid`, in a signal-delivery stop, was making
/// when the signal interrupted it with -ERESTARTSYS (before it ran, waiting
/// for the listener, or while it waited itself); std::nullopt when it was
/// in no call, the call returned anything else, the tracee is gone, or this
/// build cannot tell (can_restart_interrupted_calls()).
std::optional<CallSignature> interrupted_call(pid_t tid);

/// Makes the interrupted call of tracee `tid` (interrupted_call)
/// restart after the signal's handler, whatever its SA_RESTART. False when
/// the tracee is gone or this build cannot.
bool restart_interrupted_call(pid_t tid);

/// The last notified call the listener received from each thread of the
/// tree. Thread-safe: the listener's thread records, the tracer's asks.
class ReceivedCalls {
 public:
  /// The listener received `stop`'s call (before answering it).
  void record(const SyscallStop& stop) EXCLUDES(m_mutex);

  /// Whether `call` is the last call received from `tid`; either way `tid`
  /// is forgotten (its call has returned: the tracee is at a signal stop).
  bool take_if_received(pid_t tid, const CallSignature& call) EXCLUDES(m_mutex);

  /// Forgets `tid` (it ended).
  void forget(pid_t tid) EXCLUDES(m_mutex);

 private:
  base::Mutex m_mutex;
  std::unordered_map<pid_t, CallSignature> m_last GUARDED_BY(m_mutex);
};

}  // namespace opcache::trace
