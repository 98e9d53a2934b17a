#include "trace/notify_listener.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "base/try.hpp"
#include "trace/seccomp_filter.hpp"

// Linux 6.6's, for C library headers older than it (Debian 12's are 6.1's).
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

namespace opcache::trace {

namespace {

// System calls newer than some C library headers; the same numbers on every architecture.
#ifdef SYS_pidfd_open
constexpr long k_pidfd_open = SYS_pidfd_open;
#else
constexpr long k_pidfd_open = 434;   // Linux 5.3
#endif
#ifdef SYS_pidfd_getfd
constexpr long k_pidfd_getfd = SYS_pidfd_getfd;
#else
constexpr long k_pidfd_getfd = 438;  // Linux 5.6
#endif

Error listener_error(const char* what) {
  return Error::io(std::string("cannot ") + what +
                   " a seccomp notification of the traced command: " + std::strerror(errno));
}

// The sizes of the notification structures this kernel reads and writes,
// which may be larger than this build's headers say (SECCOMP_GET_NOTIF_SIZES).
struct NotificationSizes {
  std::size_t request = sizeof(seccomp_notif);
  std::size_t response = sizeof(seccomp_notif_resp);
};

const NotificationSizes& notification_sizes() {
  static const NotificationSizes sizes = [] {
    NotificationSizes result;
    seccomp_notif_sizes kernel{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &kernel) == 0) {
      result.request = std::max<std::size_t>(result.request, kernel.seccomp_notif);
      result.response = std::max<std::size_t>(result.response, kernel.seccomp_notif_resp);
    }
    return result;
  }();
  return sizes;
}

// Asks the kernel to wake `listener`'s receiver, and the notified thread on
// its answer, on the CPU of the thread that wakes it. False when it refuses.
bool wake_synchronously(int listener) noexcept {
  return ::ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
}

// Zeroed, aligned room for a structure of `size` bytes.
std::vector<std::uint64_t> structure_buffer(std::size_t size) {
  return std::vector<std::uint64_t>((size + sizeof(std::uint64_t) - 1) / sizeof(std::uint64_t));
}

SyscallStop stop_of(const seccomp_notif& notification) {
  SyscallStop stop;
  stop.tid = static_cast<pid_t>(notification.pid);
  stop.arch = notification.data.arch;
  stop.number = static_cast<std::uint64_t>(static_cast<std::int64_t>(notification.data.nr));  // as ptrace widens it
  std::copy(std::begin(notification.data.args), std::end(notification.data.args), stop.arguments.begin());
  stop.instruction_pointer = notification.data.instruction_pointer;
  // Only the native calls that name a file are notified (seccomp_filter.hpp).
  stop.filter_data = static_cast<std::uint32_t>(FilterVerdict::path_call);
  return stop;
}

// Whether this process may take a descriptor of another with pidfd_getfd
// (Linux 5.6; a container's seccomp profile may refuse it): tried on one of
// its own.
bool can_take_descriptors(int fd) {
  return take_descriptor(::getpid(), fd).valid();
}

// On a thread that ends afterwards: its no_new_privs and filter end with it.
NotificationSupport probe_on_this_thread() {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    return NotificationSupport::none;
  }
  sock_filter allow_all = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  const sock_fprog program{1, &allow_all};
  const base::FileDescriptor listener(
      static_cast<int>(::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &program)));
  if (!listener.valid() || !can_take_descriptors(listener.get())) {
    return NotificationSupport::none;
  }
  return wake_synchronously(listener.get()) ? NotificationSupport::synchronous : NotificationSupport::listener;
}

NotificationSupport probe_notification_support() {
  NotificationSupport support = NotificationSupport::none;
  try {
    std::thread probe([&support] { support = probe_on_this_thread(); });
    probe.join();
  } catch (const std::system_error&) {
    return NotificationSupport::none;
  }
  return support;
}

}  // namespace

NotificationSupport notification_support() {
  static std::once_flag once;
  static NotificationSupport support = NotificationSupport::none;
  std::call_once(once, [] { support = probe_notification_support(); });
  return support;
}

bool release_wakes_synchronously() {
  static const bool wakes = [] {
    utsname name{};
    int major = 0;
    int minor = 0;
    if (::uname(&name) != 0 || std::sscanf(name.release, "%d.%d", &major, &minor) != 2) {
      return false;
    }
    return major > 6 || (major == 6 && minor >= 6);
  }();
  return wakes;
}

base::FileDescriptor take_descriptor(pid_t pid, int fd) {
  const base::FileDescriptor process(static_cast<int>(::syscall(k_pidfd_open, pid, 0)));
  if (!process.valid()) {
    return base::FileDescriptor();
  }
  return base::FileDescriptor(static_cast<int>(::syscall(k_pidfd_getfd, process.get(), fd, 0)));
}

NotifyListener::NotifyListener(base::FileDescriptor listener, base::FileDescriptor stop_event, Handler handler,
                               SideChannel side)
    : m_listener(std::move(listener)),
      m_stop_event(std::move(stop_event)),
      m_handler(std::move(handler)),
      m_side(std::move(side)),
      m_request_buffer(structure_buffer(notification_sizes().request)),
      m_response_buffer(structure_buffer(notification_sizes().response)) {}

Result<std::unique_ptr<NotifyListener>> NotifyListener::start(base::FileDescriptor listener, Handler handler,
                                                              SideChannel side) {
  (void)wake_synchronously(listener.get());  // a kernel before 6.6: woken on any CPU
  base::FileDescriptor stop_event(::eventfd(0, EFD_CLOEXEC));
  if (!stop_event.valid()) {
    return Error::io(std::string("cannot create an eventfd to stop a seccomp listener: ") + std::strerror(errno));
  }
  std::unique_ptr<NotifyListener> started(
      new NotifyListener(std::move(listener), std::move(stop_event), std::move(handler), std::move(side)));
  try {
    started->m_thread = std::thread([raw = started.get()] { raw->run(); });
  } catch (const std::system_error& error) {
    return Error::io(std::string("cannot start a thread to answer seccomp notifications: ") + error.what());
  }
  return started;
}

NotifyListener::~NotifyListener() {
  (void)finish();
}

Status NotifyListener::finish() {
  if (m_thread.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(m_stop_event.get(), &one, sizeof one);
    m_thread.join();
  }
  return m_status;
}

void NotifyListener::drain_side_channel() {
  if (m_side) {
    m_side();
  }
}

void NotifyListener::run() noexcept {
  try {
    m_status = answer_until_stopped();
    drain_side_channel();
  } catch (const std::exception& exception) {
    m_status = Error::internal(std::string("answering seccomp notifications failed: ") + exception.what());
  }
  if (!m_status) {
    // Nothing answers any more: closing the listener fails the calls waiting
    // for an answer (ENOSYS) rather than leave their threads blocked.
    m_listener.reset();
  }
}

Status NotifyListener::answer_until_stopped() {
  while (true) {
    pollfd watched[2] = {{m_listener.get(), POLLIN, 0}, {m_stop_event.get(), POLLIN, 0}};
    if (::poll(watched, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      return listener_error("wait for");
    }
    if ((watched[0].revents & POLLIN) != 0) {
      OPCACHE_TRY(answer_one());
      continue;
    }
    // POLLHUP: no process is left under the filter.
    if ((watched[0].revents & (POLLHUP | POLLERR | POLLNVAL)) != 0 || watched[1].revents != 0) {
      return {};
    }
  }
}

Status NotifyListener::answer_one() {
  std::fill(m_request_buffer.begin(), m_request_buffer.end(), 0);  // RECV wants it zeroed
  auto* request = reinterpret_cast<seccomp_notif*>(m_request_buffer.data());
  if (::ioctl(m_listener.get(), SECCOMP_IOCTL_NOTIF_RECV, request) != 0) {
    // ENOENT: the notified thread was killed, or gave up its call on a signal
    // (it makes the call again, notified again, once the signal is handled).
    return errno == EINTR || errno == ENOENT ? Status() : listener_error("receive");
  }
  ++m_notifications;
  drain_side_channel();  // what the tree did before this call comes first
  m_handler(stop_of(*request));
  std::fill(m_response_buffer.begin(), m_response_buffer.end(), 0);
  auto* response = reinterpret_cast<seccomp_notif_resp*>(m_response_buffer.data());
  response->id = request->id;
  response->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
  if (::ioctl(m_listener.get(), SECCOMP_IOCTL_NOTIF_SEND, response) != 0 && errno != ENOENT) {
    return listener_error("answer");  // ENOENT: gone or interrupted meanwhile, as above
  }
  return {};
}

}  // namespace opcache::trace
