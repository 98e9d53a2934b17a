// The seccomp-bpf program a tracee runs under: for the system calls that
// name a file, SECCOMP_RET_TRACE (a ptrace stop the tracer sees) or
// SECCOMP_RET_USER_NOTIF (a notification its listener answers), as the
// mechanism says; SECCOMP_RET_ALLOW for every other call; and
// SECCOMP_RET_TRACE with a verdict of its own, under either mechanism, for
// any call made with another architecture's convention (i386 on x86_64) or
// as an x32 call, which the tracer cannot decode and must report.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <vector>

#include "trace/process_tracer.hpp"

namespace opcache::trace {

/// The SECCOMP_RET_DATA of the filter's SECCOMP_RET_TRACE verdicts: why a
/// tracee stopped. (A SECCOMP_RET_USER_NOTIF verdict carries no data: it is
/// always a `path_call`.)
enum class FilterVerdict : std::uint16_t {
  path_call = 1,     ///< a system call of trace/syscall_table.hpp, native convention
  foreign_arch = 2,  ///< any call made with another architecture's convention (a 32-bit program)
  x32_call = 3,      ///< any call of the x32 ABI (x86_64 only)
};

/// The filter, built from traced_syscalls() before the child starts so that the
/// child only has to install it.
class SeccompFilter {
 public:
  /// A filter whose calls that name a file reach the tracer by `mechanism`.
  /// With `unnotified_page` (x86_64 only), a native call made from the page
  /// of the preload library's code (trace/preload/preload_abi.hpp) is
  /// allowed as it is, whatever it is: that library reports it itself.
  explicit SeccompFilter(TraceMechanism mechanism, bool unnotified_page = false);
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;

  /// Installs the filter on the calling thread (inherited across fork and
  /// execve), which must already have no_new_privs set. Tells the kernel not
  /// to force the speculative store bypass mitigation on the tracee where it
  /// can (SECCOMP_FILTER_FLAG_SPEC_ALLOW, Linux 4.17). A `user_notification`
  /// filter is installed with SECCOMP_FILTER_FLAG_NEW_LISTENER (Linux 5.0):
  /// `listener` is set to the new listener's descriptor (O_CLOEXEC: closed
  /// by a successful execve), and to -1 for a `ptrace_stop` filter or on
  /// failure; and with SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (Linux 5.19,
  /// older than the sync wake-up user notifications need): once the
  /// listener has received a call, only a fatal signal interrupts it, so a
  /// call the tracer classified always runs. (A signal whose handler lacks
  /// SA_RESTART and that comes in the microseconds before, makes the call
  /// fail with EINTR unclassified, as it would interrupt any slow call.)
  /// Returns 0 or an errno value. Async-signal-safe: for a child between
  /// fork and execve.
  int install(int& listener) const noexcept;

  /// The mechanism it was built for.
  TraceMechanism mechanism() const noexcept { return m_mechanism; }

  /// Whether it lets the preload library's page through.
  bool unnotified_page() const noexcept { return m_unnotified_page; }

  /// How many BPF instructions the program has.
  std::size_t size() const noexcept { return m_code.size(); }

 private:
  TraceMechanism m_mechanism;
  bool m_unnotified_page;
  std::vector<sock_filter> m_code;
  sock_fprog m_program{};
};

}  // namespace opcache::trace
