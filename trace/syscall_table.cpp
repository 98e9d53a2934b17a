#include "trace/syscall_table.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

namespace opcache::trace {

namespace {

// System calls added after the C library headers some machines have. From
// 424 on, Linux numbers every new call the same on every architecture (the
// unified table, Linux 5.1+), so the numbers are written here once.
constexpr long k_io_uring_setup_number = 425;
constexpr long k_move_mount_number = 429;
constexpr long k_fsmount_number = 432;
constexpr long k_openat2_number = 437;
#if defined(SYS_faccessat2)  // the newest of them: the others are older
static_assert(SYS_openat2 == k_openat2_number && SYS_faccessat2 == k_faccessat2_number &&
              SYS_io_uring_setup == k_io_uring_setup_number && SYS_move_mount == k_move_mount_number &&
              SYS_fsmount == k_fsmount_number);
#endif

// Whether readlink and readlinkat stop the tracee. They would add only
// `absent` events (a stat-like look-up), and glibc's realpath(3) calls
// readlink once per component of every path it resolves: cc1 resolves each
// include candidate, so readlink made 1182 of the 1595 stops of
// `gcc -O2 -c` of a 205-line C file (zlib's zpipe.c) and 3988 of 4891 for
// a 10-line C++ file with five standard headers. Watched, tracing that C
// compile took 18-37 % more time than running it untraced; unwatched,
// 6-13 % (2 vCPUs, shared). Each of the 44 paths readlink missed in that
// compile was recorded `absent` anyway, itself (34) or a file below it (10),
// by an open or a stat.
constexpr bool k_watch_readlink = false;

constexpr unsigned k_open_creat_flags = O_CREAT | O_WRONLY | O_TRUNC;

// A rule whose path is argument `path` (relative to descriptor argument `dirfd`).
SyscallRule path_rule(long number, const char* name, SyscallOp op, int dirfd, int path, int flags = k_no_argument) {
  SyscallRule rule;
  rule.number = number;
  rule.name = name;
  rule.op = op;
  rule.dirfd_argument = dirfd;
  rule.path_argument = path;
  rule.flags_argument = flags;
  return rule;
}

SyscallRule with_fixed_flags(SyscallRule rule, unsigned flags) {
  rule.fixed_flags = flags;
  return rule;
}

SyscallRule untraced_with(SyscallRule rule, unsigned flag) {
  rule.untraced_flag = flag;
  return rule;
}

SyscallRule with_target(SyscallRule rule, int dirfd, int path) {
  rule.target_dirfd_argument = dirfd;
  rule.target_path_argument = path;
  return rule;
}

// Opening, executing and looking paths up.
void add_reading_rules(std::vector<SyscallRule>& rules) {
  constexpr int none = k_no_argument;
#ifdef SYS_open
  rules.push_back(path_rule(SYS_open, "open", SyscallOp::open, none, 0, 1));
#endif
#ifdef SYS_creat
  rules.push_back(with_fixed_flags(path_rule(SYS_creat, "creat", SyscallOp::open, none, 0), k_open_creat_flags));
#endif
  rules.push_back(path_rule(SYS_openat, "openat", SyscallOp::open, 0, 1, 2));
  rules.push_back(path_rule(k_openat2_number, "openat2", SyscallOp::open_how, 0, 1, 2));
  rules.push_back(path_rule(SYS_execve, "execve", SyscallOp::exec, none, 0));
  rules.push_back(path_rule(SYS_execveat, "execveat", SyscallOp::exec, 0, 1, 4));
#ifdef SYS_getdents
  rules.push_back(path_rule(SYS_getdents, "getdents", SyscallOp::list, none, 0));
#endif
  rules.push_back(path_rule(SYS_getdents64, "getdents64", SyscallOp::list, none, 0));
}

void add_look_up_rules(std::vector<SyscallRule>& rules) {
  constexpr int none = k_no_argument;
#ifdef SYS_stat
  rules.push_back(path_rule(SYS_stat, "stat", SyscallOp::look_up, none, 0));
#endif
#ifdef SYS_lstat
  rules.push_back(with_fixed_flags(path_rule(SYS_lstat, "lstat", SyscallOp::look_up, none, 0), AT_SYMLINK_NOFOLLOW));
#endif
  rules.push_back(untraced_with(path_rule(SYS_newfstatat, "newfstatat", SyscallOp::look_up, 0, 1, 3), AT_EMPTY_PATH));
  rules.push_back(untraced_with(path_rule(SYS_statx, "statx", SyscallOp::look_up, 0, 1, 2), AT_EMPTY_PATH));
#ifdef SYS_access
  rules.push_back(path_rule(SYS_access, "access", SyscallOp::look_up, none, 0));
#endif
  rules.push_back(path_rule(SYS_faccessat, "faccessat", SyscallOp::look_up, 0, 1));
  rules.push_back(path_rule(k_faccessat2_number, "faccessat2", SyscallOp::look_up, 0, 1, 3));
  if (k_watch_readlink) {
#ifdef SYS_readlink
    rules.push_back(
        with_fixed_flags(path_rule(SYS_readlink, "readlink", SyscallOp::look_up, none, 0), AT_SYMLINK_NOFOLLOW));
#endif
    rules.push_back(
        with_fixed_flags(path_rule(SYS_readlinkat, "readlinkat", SyscallOp::look_up, 0, 1), AT_SYMLINK_NOFOLLOW));
  }
  rules.push_back(path_rule(SYS_chdir, "chdir", SyscallOp::look_up, none, 0));
}

// Removing, renaming, creating and truncating.
void add_writing_rules(std::vector<SyscallRule>& rules) {
  constexpr int none = k_no_argument;
#ifdef SYS_unlink
  rules.push_back(path_rule(SYS_unlink, "unlink", SyscallOp::remove, none, 0));
#endif
#ifdef SYS_rmdir
  rules.push_back(path_rule(SYS_rmdir, "rmdir", SyscallOp::remove, none, 0));
#endif
  rules.push_back(path_rule(SYS_unlinkat, "unlinkat", SyscallOp::remove, 0, 1));
#ifdef SYS_rename
  rules.push_back(with_target(path_rule(SYS_rename, "rename", SyscallOp::rename, none, 0), none, 1));
#endif
#ifdef SYS_renameat
  rules.push_back(with_target(path_rule(SYS_renameat, "renameat", SyscallOp::rename, 0, 1), 2, 3));
#endif
  rules.push_back(with_target(path_rule(SYS_renameat2, "renameat2", SyscallOp::rename, 0, 1, 4), 2, 3));
#ifdef SYS_link
  rules.push_back(path_rule(SYS_link, "link", SyscallOp::create, none, 1));
#endif
  rules.push_back(path_rule(SYS_linkat, "linkat", SyscallOp::create, 2, 3));
#ifdef SYS_symlink
  rules.push_back(path_rule(SYS_symlink, "symlink", SyscallOp::create, none, 1));
#endif
  rules.push_back(path_rule(SYS_symlinkat, "symlinkat", SyscallOp::create, 1, 2));
#ifdef SYS_mkdir
  rules.push_back(path_rule(SYS_mkdir, "mkdir", SyscallOp::create, none, 0));
#endif
  rules.push_back(path_rule(SYS_mkdirat, "mkdirat", SyscallOp::create, 0, 1));
#ifdef SYS_mknod
  rules.push_back(path_rule(SYS_mknod, "mknod", SyscallOp::create, none, 0));
#endif
  rules.push_back(path_rule(SYS_mknodat, "mknodat", SyscallOp::create, 0, 1));
  rules.push_back(path_rule(SYS_truncate, "truncate", SyscallOp::truncate, none, 0));
}

// Ways to open files that no path argument shows: the trace goes blind.
void add_unobservable_rules(std::vector<SyscallRule>& rules) {
  constexpr int none = k_no_argument;
  rules.push_back(path_rule(k_io_uring_setup_number, "io_uring_setup", SyscallOp::unobservable, none, none));
  rules.push_back(path_rule(SYS_open_by_handle_at, "open_by_handle_at", SyscallOp::unobservable, none, none));
}

// Changing which files the tree's paths name: the trace goes blind.
void add_file_system_view_rules(std::vector<SyscallRule>& rules) {
  constexpr int none = k_no_argument;
  constexpr auto op = SyscallOp::new_file_system_view;
  rules.push_back(path_rule(SYS_chroot, "chroot", op, none, none));
  rules.push_back(path_rule(SYS_pivot_root, "pivot_root", op, none, none));
  rules.push_back(path_rule(SYS_mount, "mount", op, none, none));
  rules.push_back(path_rule(SYS_umount2, "umount2", op, none, none));
  rules.push_back(path_rule(k_move_mount_number, "move_mount", op, none, none));
  rules.push_back(path_rule(k_fsmount_number, "fsmount", op, none, none));
  rules.push_back(path_rule(SYS_unshare, "unshare", op, none, none, 0));
  rules.push_back(path_rule(SYS_setns, "setns", op, none, none, 1));
}

std::vector<SyscallRule> build_rules() {
  std::vector<SyscallRule> rules;
  add_reading_rules(rules);
  add_look_up_rules(rules);
  add_writing_rules(rules);
  add_unobservable_rules(rules);
  add_file_system_view_rules(rules);
  return rules;
}

}  // namespace

std::uint32_t native_audit_arch() {
#if defined(__x86_64__)
  return AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  return AUDIT_ARCH_AARCH64;
#else
#error "trace/: only x86_64 and aarch64 are supported"
#endif
}

std::uint32_t x32_syscall_bit() {
#if defined(__x86_64__)
  return 0x40000000U;  // __X32_SYSCALL_BIT
#else
  return 0;
#endif
}

std::span<const SyscallRule> traced_syscalls() {
  static const std::vector<SyscallRule> rules = build_rules();
  return rules;
}

const SyscallRule* find_syscall_rule(std::uint64_t number) {
  const auto rules = traced_syscalls();
  const auto found = std::find_if(rules.begin(), rules.end(), [number](const SyscallRule& rule) {
    return static_cast<std::uint64_t>(rule.number) == number;
  });
  return found == rules.end() ? nullptr : &*found;
}

Result<std::optional<SyscallStop>> read_syscall_stop(pid_t tid) {
  __ptrace_syscall_info info{};
  if (::ptrace(PTRACE_GET_SYSCALL_INFO, tid, reinterpret_cast<void*>(sizeof info), &info) < 0) {
    if (errno == ESRCH) {
      return std::optional<SyscallStop>();
    }
    return Error::io("cannot read the system call of process " + std::to_string(tid) +
                     " (PTRACE_GET_SYSCALL_INFO, Linux 5.3): " + std::strerror(errno));
  }
  if (info.op != PTRACE_SYSCALL_INFO_SECCOMP) {
    return Error::io("process " + std::to_string(tid) + " is not in a seccomp stop");
  }
  SyscallStop stop;
  stop.tid = tid;
  stop.arch = info.arch;
  stop.number = info.seccomp.nr;
  std::copy(std::begin(info.seccomp.args), std::end(info.seccomp.args), stop.arguments.begin());
  stop.instruction_pointer = info.instruction_pointer;
  stop.filter_data = info.seccomp.ret_data;
  return std::optional<SyscallStop>(stop);
}

}  // namespace opcache::trace
