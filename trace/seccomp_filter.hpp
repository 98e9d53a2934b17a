// The seccomp-bpf program a tracee runs under: SECCOMP_RET_TRACE (a stop the
// tracer sees) for the system calls that name a file, SECCOMP_RET_ALLOW for
// every other call, and SECCOMP_RET_TRACE with a verdict of its own for any
// call made with another architecture's convention (i386 on x86_64) or as an
// x32 call, which the tracer cannot decode and must report.
#pragma once

#include <linux/filter.h>

#include <cstdint>
#include <vector>

namespace opcache::trace {

/// The SECCOMP_RET_DATA of the filter's SECCOMP_RET_TRACE verdicts: why a
/// tracee stopped.
enum class FilterVerdict : std::uint16_t {
  path_call = 1,     ///< a system call of trace/syscall_table.hpp, native convention
  foreign_arch = 2,  ///< any call made with another architecture's convention (a 32-bit program)
  x32_call = 3,      ///< any call of the x32 ABI (x86_64 only)
};

/// The filter, built from traced_syscalls() before the fork so that the
/// child only has to install it.
class SeccompFilter {
 public:
  SeccompFilter();
  SeccompFilter(const SeccompFilter&) = delete;
  SeccompFilter& operator=(const SeccompFilter&) = delete;

  /// Installs the filter on the calling thread (inherited across fork and
  /// execve), which must already have no_new_privs set. Tells the kernel not
  /// to force the speculative store bypass mitigation on the tracee where it
  /// can (SECCOMP_FILTER_FLAG_SPEC_ALLOW, Linux 4.17). Returns 0 or an errno
  /// value. Async-signal-safe: for a child between fork and execve.
  int install() const noexcept;

  /// How many BPF instructions the program has.
  std::size_t size() const noexcept { return m_code.size(); }

 private:
  std::vector<sock_filter> m_code;
  sock_fprog m_program{};
};

}  // namespace opcache::trace
