// The system calls that name a file, for the architecture this is built for
// (x86_64 or aarch64): their numbers, where their path, directory descriptor
// and flags are among the six arguments, and what each does to the path.
// The seccomp filter stops a tracee on exactly these; the classifier reads
// each stop through this table. Also reading one stop's call from a tracee.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <span>

#include "opcache/result.hpp"

namespace opcache::trace {

/// faccessat2 (Linux 5.8): newer than some C library headers; from 424 on,
/// Linux numbers every new call the same on every architecture.
inline constexpr long k_faccessat2_number = 439;

/// What a traced system call does to the path(s) it names.
enum class SyscallOp : std::uint8_t {
  open,      ///< open, openat, creat: classified by its open(2) flags
  open_how,  ///< openat2: the open(2) flags are the first field of the struct open_how it points to
  exec,      ///< execve, execveat: the program, and what the kernel loads to run it
  look_up,   ///< stat family, access, chdir, readlink: only a missing path is an event
  list,      ///< getdents: the directory its descriptor names
  remove,    ///< unlink, unlinkat, rmdir
  rename,    ///< source removed, target written (both written when RENAME_EXCHANGE)
  create,    ///< mkdir, link, symlink: the new name, written when it did not exist
  truncate,  ///< truncate: written
  /// io_uring_setup, open_by_handle_at: files reached through them (an
  /// io_uring's IORING_OP_OPENAT, a file handle) are out of the filter's
  /// sight, so the trace is blind from the first such call.
  unobservable,
  /// chroot, pivot_root, mount and the new mount API, and unshare and setns
  /// into a mount namespace (the CLONE_NEWNS bit of the flags argument; setns
  /// also with 0, any namespace): the tree's paths may then name other files
  /// than the tracer's, so the trace is blind from the first such call.
  new_file_system_view,
};

/// An argument index that is not there.
inline constexpr int k_no_argument = -1;

/// Where a system call's operands are among its arguments.
struct SyscallRule {
  long number = -1;
  const char* name = "";
  SyscallOp op = SyscallOp::look_up;
  int dirfd_argument = k_no_argument;         ///< k_no_argument: a relative path is relative to the working directory
  int path_argument = k_no_argument;          ///< for `list`, the descriptor's argument
  int flags_argument = k_no_argument;         ///< open(2) flags for `open`; AT_* / RENAME_* flags for the others
  int target_dirfd_argument = k_no_argument;  ///< `rename`: the new name's directory descriptor
  int target_path_argument = k_no_argument;   ///< `rename`: the new name
  unsigned fixed_flags = 0;  ///< flags the call implies (creat: O_CREAT|O_WRONLY|O_TRUNC; lstat: AT_SYMLINK_NOFOLLOW)
  /// When non-zero, the seccomp filter lets the call run untraced if its
  /// flags argument has this bit: AT_EMPTY_PATH on newfstatat and statx is
  /// how glibc implements fstat(2), which names no path.
  unsigned untraced_flag = 0;
};

/// The AUDIT_ARCH_* value of this build's architecture (seccomp_data.arch).
std::uint32_t native_audit_arch();

/// The bit that marks an x32 system call number on x86_64; 0 on other architectures.
std::uint32_t x32_syscall_bit();

/// Every traced system call of this architecture, each once.
std::span<const SyscallRule> traced_syscalls();

/// The rule of system call `number`, or nullptr when it is not traced.
const SyscallRule* find_syscall_rule(std::uint64_t number);

/// One seccomp stop: which thread, the architecture it called with, the call
/// and its arguments, and the SECCOMP_RET_DATA the filter returned.
struct SyscallStop {
  pid_t tid = 0;
  std::uint32_t arch = 0;
  std::uint64_t number = 0;
  std::array<std::uint64_t, 6> arguments{};
  std::uint64_t instruction_pointer = 0;  ///< where the call was made (just after its instruction)
  std::uint32_t filter_data = 0;
};

/// Reads the system call tracee `tid` is stopped in (it must be in a seccomp
/// stop), with PTRACE_GET_SYSCALL_INFO (Linux 5.3). std::nullopt when the
/// tracee is gone (killed meanwhile); `io` when the kernel cannot say.
Result<std::optional<SyscallStop>> read_syscall_stop(pid_t tid);

}  // namespace opcache::trace
