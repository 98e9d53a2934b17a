// The listener side of TraceMechanism::user_notification: a thread that
// receives the seccomp notifications of a traced tree's calls that name a
// file (SECCOMP_IOCTL_NOTIF_RECV), hands each to the classifier while the
// calling thread waits, and lets the call run as it was asked
// (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Also whether this kernel can do it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "base/file_io.hpp"
#include "opcache/result.hpp"
#include "trace/syscall_table.hpp"

namespace opcache::trace {

/// What this kernel offers a seccomp listener, as far as the tracer cares.
enum class NotificationSupport {
  none,         ///< no listener (before Linux 5.6, or seccomp refused here)
  listener,     ///< listeners, woken on any CPU (slower than a ptrace stop)
  synchronous,  ///< SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (Linux 6.6): woken on the caller's CPU
};

/// What this kernel offers, probed once per process on a short-lived thread
/// of its own (no_new_privs and a filter that allows every call, with a
/// listener, are set on that thread only and end with it). Thread-safe.
/// For diagnostics and tests: tracing itself never probes (the mechanism
/// follows the release, and a refused listener falls back to ptrace stops).
NotificationSupport notification_support();

/// Whether this kernel's release is Linux 6.6 or later, whose listeners can
/// be woken on the caller's CPU (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP): what
/// the default mechanism goes by. Unlike notification_support() it starts no
/// thread and installs no filter (that probe cost every miss 0.4 ms); where
/// such a kernel, or a seccomp profile, refuses a listener after all,
/// TracedChild::start falls back to ptrace stops. Thread-safe.
bool release_wakes_synchronously();

/// Descriptor `fd` of process `pid` (which must not have been reaped, so
/// that `pid` is still its own), duplicated into this process with
/// pidfd_open and pidfd_getfd (Linux 5.6; O_CLOEXEC): how the tracer takes
/// the listener a traced child made. Invalid when refused or gone.
base::FileDescriptor take_descriptor(pid_t pid, int fd);

/// One traced command's listener, answering on a thread of its own from
/// start() until finish(). Not copyable; finish() (or the destructor) from
/// the thread that started it.
class NotifyListener {
 public:
  /// Called with each notified call, on the listener's thread, while the
  /// calling thread waits for the answer (its call has not run yet). `tid`
  /// is the thread in this process's pid namespace; `filter_data` is
  /// FilterVerdict::path_call. Must not throw.
  using Handler = std::function<void(const SyscallStop&)>;

  /// Reads input that comes before the notifications it precedes (the
  /// preload library's records): called on the listener's thread before
  /// each notification is handled, and once more when the listener stops.
  /// Its input is not polled: a wake-up per record cost as much as the
  /// notifications it replaces; a sender whose socket is full makes its
  /// call notified instead. Must not throw. Empty: none.
  using SideChannel = std::function<void()>;

  /// Starts answering the notifications of `listener` (a seccomp listener
  /// descriptor, owned from now on) with `handler`, woken on the notified
  /// thread's CPU where the kernel can (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP,
  /// Linux 6.6). `io` when the thread
  /// or its stop event cannot be made (`listener` is then closed, and the
  /// calls it would have answered fail with ENOSYS).
  static Result<std::unique_ptr<NotifyListener>> start(base::FileDescriptor listener, Handler handler,
                                                       SideChannel side = nullptr);

  /// finish().
  ~NotifyListener();
  NotifyListener(const NotifyListener&) = delete;
  NotifyListener& operator=(const NotifyListener&) = delete;

  /// Stops answering and waits for the thread; to be called once no
  /// process under the filter is left (the tree has ended), since a call
  /// notified later would never be answered until the listener is closed.
  /// The thread also stops by itself when the filter has no process left.
  /// Returns the thread's failure (`io`: a notification could not be
  /// received or answered), the first call's thereafter too.
  Status finish();

  /// How many notifications were received; final once finish() returned.
  std::size_t notifications() const noexcept { return m_notifications; }

 private:
  NotifyListener(base::FileDescriptor listener, base::FileDescriptor stop_event, Handler handler, SideChannel side);
  void run() noexcept;
  void drain_side_channel();
  Status answer_until_stopped();
  Status answer_one();

  base::FileDescriptor m_listener;
  base::FileDescriptor m_stop_event;  ///< an eventfd finish() writes
  Handler m_handler;
  SideChannel m_side;  ///< may be empty
  std::vector<std::uint64_t> m_request_buffer;   ///< a seccomp_notif as large as the kernel's
  std::vector<std::uint64_t> m_response_buffer;  ///< a seccomp_notif_resp as large as the kernel's
  std::size_t m_notifications = 0;               ///< the listener thread's, until it is joined
  Status m_status;                               ///< the listener thread's, until it is joined
  std::thread m_thread;
};

}  // namespace opcache::trace
