// The tracer's preload library (LD_PRELOAD in a traced tree, x86_64). A
// seccomp notification costs a compile one round trip to the listener per
// look-up (~12-20 us on 2 vCPUs); a compiler driver and cc1 look up
// hundreds of paths that way (search paths, include directories). This
// library makes those read-only look-ups itself, inside the program: the
// call runs through one page of code at preload_abi.hpp's fixed address,
// which the filter lets through, and what the tracer needs of it (a file
// read with its identity, or a path found absent) goes over the inherited
// datagram socket the environment names, before the program sees the
// result. The tracer reads that socket before it handles any notification,
// so a record comes before the notified calls that followed it in the same
// thread, or in a process that waited for it. (Between the call and its
// record, another process's notified call may be handled first: a tree
// that reads a file while another of its processes replaces it is racy
// untraced too.) An open that fails otherwise than on a missing path is
// made again notified, for the tracer to classify what is there.
//
// An execve of a program that is not there is such a look-up too, and so
// is each directory of execvp's walk of PATH, which the library makes as
// the C library does (a compiler driver runs `as` that way).
//
// Everything else stays notified, so a gap here costs speed, never an
// event: a call that writes or creates, an exec that runs, a path relative
// to a directory descriptor, a path under /proc, /sys or /dev (whose links
// the tracer resolves), a path too long for one record, an access check
// with flags (the C library's own), a program that closed or replaced the
// socket, the dynamic loader's own opens, the C library's internal opens
// (fopen, locales), statically linked programs.
//
// It runs inside arbitrary programs: C library calls only, no C++ runtime,
// no allocation, no state but what the constructor sets.
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdarg>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "trace/preload/preload_abi.hpp"

namespace {

using opcache::trace::preload::k_channel_variable;
using opcache::trace::preload::k_channel_version;
using opcache::trace::preload::k_max_record_path;
using opcache::trace::preload::k_trampoline_address;
using opcache::trace::preload::k_trampoline_size;
using opcache::trace::preload::Record;
using opcache::trace::preload::RecordAccess;

// The page's code: a System V call (number, a1, ..., a5) moved into the
// registers of the `syscall` instruction, which returns the kernel's result
// (a negative errno value on failure).
//   mov rax,rdi; mov rdi,rsi; mov rsi,rdx; mov rdx,rcx; mov r10,r8; mov r8,r9; syscall; ret
constexpr unsigned char k_trampoline_code[] = {0x48, 0x89, 0xf8, 0x48, 0x89, 0xf7, 0x48, 0x89, 0xd6, 0x48, 0x89,
                                               0xca, 0x4d, 0x89, 0xc2, 0x4d, 0x89, 0xc8, 0x0f, 0x05, 0xc3};

static_assert(sizeof k_trampoline_code == opcache::trace::preload::k_trampoline_return_offset + 1 &&
              k_trampoline_code[18] == 0x0f && k_trampoline_code[19] == 0x05);

using UnnotifiedCall = long (*)(long, long, long, long, long, long);

// Set once by the constructor; read-only afterwards (and inherited by fork).
struct Observer {
  int channel = -1;
  std::uint64_t channel_inode = 0;
  UnnotifiedCall unnotified = nullptr;  ///< null: everything stays notified
  /// The C library's own faccessat, for a call with flags: it emulates
  /// faccessat2 where the kernel lacks it (before Linux 5.8, or a seccomp
  /// profile that refuses it with ENOSYS). Null: not found.
  int (*next_faccessat)(int, const char*, int, int) = nullptr;
  /// Whether execve opens the program before any other check (Linux 6.8
  /// on): only then does a missing program fail it with ENOENT whatever
  /// else is wrong with the call (before, an argv too large gave E2BIG).
  bool exec_opens_first = false;
} g_observer;

// One datagram: the record and its path.
struct Datagram {
  Record header;
  char path[k_max_record_path + 1];
};

// "<version>:<descriptor>:<inode>" of k_channel_variable.
bool parse_channel(const char* text, int& fd, std::uint64_t& inode) {
  char* end = nullptr;
  if (std::strtoul(text, &end, 10) != k_channel_version || *end != ':') {
    return false;
  }
  fd = static_cast<int>(std::strtol(end + 1, &end, 10));
  if (*end != ':') {
    return false;
  }
  inode = std::strtoull(end + 1, &end, 10);
  return *end == '\0' && fd >= 0;
}

// Whether descriptor `fd` is still the socket the tracer gave the tree.
bool is_channel(int fd, std::uint64_t inode) {
  struct stat info {};
  return ::fstat(fd, &info) == 0 && S_ISSOCK(info.st_mode) && info.st_ino == inode;
}

// The page at k_trampoline_address, or null when that address is taken.
UnnotifiedCall map_trampoline() {
  void* wanted = reinterpret_cast<void*>(k_trampoline_address);
  void* page = ::mmap(wanted, k_trampoline_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                      -1, 0);
  if (page == MAP_FAILED) {
    return nullptr;
  }
  if (page != wanted) {  // a kernel before 4.17 takes the address as a hint
    ::munmap(page, k_trampoline_size);
    return nullptr;
  }
  std::memcpy(page, k_trampoline_code, sizeof k_trampoline_code);
  if (::mprotect(page, k_trampoline_size, PROT_READ | PROT_EXEC) != 0) {
    ::munmap(page, k_trampoline_size);
    return nullptr;
  }
  return reinterpret_cast<UnnotifiedCall>(page);
}

// Linux 6.8 or later, by the release uname(2) gives.
bool release_opens_program_first() {
  utsname name{};
  if (::uname(&name) != 0) {
    return false;
  }
  int major = 0;
  int minor = 0;
  const char* at = name.release;
  for (; *at >= '0' && *at <= '9'; ++at) {
    major = major * 10 + (*at - '0');
  }
  if (*at++ != '.') {
    return false;
  }
  for (; *at >= '0' && *at <= '9'; ++at) {
    minor = minor * 10 + (*at - '0');
  }
  return major > 6 || (major == 6 && minor >= 8);
}

__attribute__((constructor)) void start_observing() {
  g_observer.next_faccessat = reinterpret_cast<int (*)(int, const char*, int, int)>(::dlsym(RTLD_NEXT, "faccessat"));
  g_observer.exec_opens_first = release_opens_program_first();
  const char* channel = std::getenv(k_channel_variable);
  int fd = -1;
  std::uint64_t inode = 0;
  if (channel == nullptr || !parse_channel(channel, fd, inode) || !is_channel(fd, inode)) {
    return;
  }
  g_observer.channel = fd;
  g_observer.channel_inode = inode;
  g_observer.unnotified = map_trampoline();
}

// Whether a call may run unnotified now: the page is mapped and the socket
// is still the tracer's (a program may close it, or put another file in its place).
bool observing() {
  return g_observer.unnotified != nullptr && is_channel(g_observer.channel, g_observer.channel_inode);
}

// Whether `path` names /proc, /sys or /dev anywhere, however spelled
// ("//proc", "/x/../dev"): the tracer resolves those links as the traced process sees
// them, which only a notification lets it do.
bool names_kernel_files(const char* path) {
  constexpr const char* k_kernel_directories[] = {"proc", "sys", "dev"};
  for (const char* at = path; (at = std::strchr(at, '/')) != nullptr; ++at) {
    for (const char* directory : k_kernel_directories) {
      const std::size_t length = std::strlen(directory);
      if (std::strncmp(at + 1, directory, length) == 0 && (at[1 + length] == '/' || at[1 + length] == '\0')) {
        return true;
      }
    }
  }
  return false;
}

// The absolute path `path` names relative to `dirfd`, into `datagram`:
// false when the call is left to the notifications (see the file's comment).
bool take_path(int dirfd, const char* path, Datagram& datagram) {
  if (path == nullptr || path[0] == '\0') {  // kept: built with -fno-delete-null-pointer-checks
    return false;
  }
  std::size_t prefix = 0;
  if (path[0] != '/') {
    // The system call, not getcwd(3): the C library's may allocate (an
    // unreachable or long working directory), which a vfork child must not.
    if (dirfd != AT_FDCWD || ::syscall(SYS_getcwd, datagram.path, k_max_record_path) <= 0 || datagram.path[0] != '/') {
      return false;
    }
    prefix = std::strlen(datagram.path);
    datagram.path[prefix++] = '/';
  }
  const std::size_t length = std::strlen(path);
  if (prefix + length > k_max_record_path) {
    return false;
  }
  std::memcpy(datagram.path + prefix, path, length + 1);
  datagram.header = Record{};
  datagram.header.path_size = static_cast<std::uint32_t>(prefix + length);
  return !names_kernel_files(datagram.path);
}

std::int64_t nanoseconds_of(const timespec& time) {
  return static_cast<std::int64_t>(time.tv_sec) * 1'000'000'000 + time.tv_nsec;
}

bool send_datagram(const Datagram& datagram) {
  const std::size_t size = sizeof(Record) + datagram.header.path_size;
  ssize_t sent = 0;
  do {
    sent = ::send(g_observer.channel, &datagram, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  } while (sent < 0 && errno == EINTR);
  return sent == static_cast<ssize_t>(size);
}

long unnotified(long number, long a, long b, long c, long d) {
  return g_observer.unnotified(number, a, b, c, d, 0);
}

// faccessat2 (Linux 5.8), which older C library headers do not name.
constexpr long k_faccessat2_number = 439;

long notified(long number, long a, long b, long c, long d) {
  const long result = ::syscall(number, a, b, c, d);
  return result < 0 ? -errno : result;
}

// The open of `datagram`'s path made again, notified, with the flags that
// change what the tracer's classifier finds there (O_NOFOLLOW, O_DIRECTORY):
// for an open whose outcome the library does not classify itself, or
// whose record could not be sent. O_NONBLOCK: a FIFO's open does not wait.
void reopen_notified(const Datagram& datagram, int flags) {
  const long fd = notified(SYS_openat, AT_FDCWD, reinterpret_cast<long>(datagram.path),
                           O_RDONLY | O_NONBLOCK | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY)), 0);
  if (fd >= 0) {
    ::close(static_cast<int>(fd));
  }
}

// A look-up's record that could not be sent (the socket is full or gone):
// the look-up made again, notified, so that the tracer classifies it itself.
void report(Datagram& datagram, RecordAccess access, int open_flags) {
  datagram.header.access = access;
  if (send_datagram(datagram)) {
    return;
  }
  if (access == RecordAccess::absent) {
    notified(SYS_faccessat, AT_FDCWD, reinterpret_cast<long>(datagram.path), F_OK, 0);
  } else {
    reopen_notified(datagram, open_flags);
  }
}

// The record of a stat or access that failed with `error` (a negative
// errno value): a missing path is absent; an existing one is no event.
void report_look_up_failure(Datagram& datagram, long error) {
  if (error == -ENOENT || error == -ENOTDIR) {
    report(datagram, RecordAccess::absent, 0);
  }
}

// The record of an open that failed with `error`. ENOENT, and ENOTDIR
// without O_DIRECTORY, mean a missing path; any other failure (a directory
// expected, a symlink refused, no permission, interrupted) is left to the
// tracer, which classifies what is at the path as it would have at a
// notification: the open is made again, notified.
void report_open_failure(Datagram& datagram, long error, int flags) {
  if (error == -ENOENT || (error == -ENOTDIR && (flags & O_DIRECTORY) == 0)) {
    return report(datagram, RecordAccess::absent, flags);
  }
  reopen_notified(datagram, flags);
}

// The record of descriptor `fd`, just opened read-only: a file read, with
// its identity when regular; nothing for a directory.
void report_opened(Datagram& datagram, long fd, int flags) {
  struct stat info {};
  if (::fstat(static_cast<int>(fd), &info) != 0) {
    return reopen_notified(datagram, flags);
  }
  if (S_ISDIR(info.st_mode)) {
    return;
  }
  if (S_ISREG(info.st_mode)) {
    datagram.header.has_identity = 1;
    datagram.header.device = static_cast<std::uint64_t>(info.st_dev);
    datagram.header.inode = static_cast<std::uint64_t>(info.st_ino);
    datagram.header.size = static_cast<std::int64_t>(info.st_size);
    datagram.header.mtime_ns = nanoseconds_of(info.st_mtim);
    datagram.header.ctime_ns = nanoseconds_of(info.st_ctim);
  }
  report(datagram, RecordAccess::read, flags);
}

// The C library's convention: the result, or -1 with errno set; a call
// that succeeds leaves errno as the caller had it (`saved`), whatever the
// library's own calls did to it.
long returned(long result, int saved) {
  if (result < 0) {
    errno = static_cast<int>(-result);
    return -1;
  }
  errno = saved;
  return result;
}

bool opens_read_only(int flags) {
  return (static_cast<std::uint32_t>(flags) & opcache::trace::preload::k_unnotified_open_refused_flags) == 0;
}

// Each entry point below: the cheap checks first, then the path, in a
// datagram not zeroed (4 KiB of stack; its header is set by take_path).

int open_file(int dirfd, const char* path, int flags, mode_t mode) {
  const int saved = errno;
  Datagram datagram;
  if (!opens_read_only(flags) || !observing() || !take_path(dirfd, path, datagram)) {
    return static_cast<int>(returned(notified(SYS_openat, dirfd, reinterpret_cast<long>(path), flags, mode), saved));
  }
  const long fd = unnotified(SYS_openat, dirfd, reinterpret_cast<long>(path), flags, 0);
  if (fd >= 0) {
    report_opened(datagram, fd, flags);
  } else {
    report_open_failure(datagram, fd, flags);
  }
  return static_cast<int>(returned(fd, saved));
}

// The mode argument of an open that creates.
mode_t mode_argument(int flags, va_list arguments) {
  return (flags & (O_CREAT | __O_TMPFILE)) != 0 ? static_cast<mode_t>(va_arg(arguments, unsigned)) : 0;
}

int stat_path(int dirfd, const char* path, struct stat* buffer, int flags) {
  const int saved = errno;
  Datagram datagram;
  const bool plain = (flags & ~(AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT)) == 0;
  if (!plain || !observing() || !take_path(dirfd, path, datagram)) {
    return static_cast<int>(returned(
        notified(SYS_newfstatat, dirfd, reinterpret_cast<long>(path), reinterpret_cast<long>(buffer), flags), saved));
  }
  const long result = unnotified(SYS_newfstatat, dirfd, reinterpret_cast<long>(path), reinterpret_cast<long>(buffer), flags);
  report_look_up_failure(datagram, result);
  return static_cast<int>(returned(result, saved));
}

// A check with flags (AT_EACCESS, AT_SYMLINK_NOFOLLOW) is the C library's
// own, notified: faccessat2 may be missing (Linux before 5.8, or a seccomp
// profile that refuses it with ENOSYS), and only the C library emulates it.
// Before this library's constructor (from another library's), the C
// library's function is looked up at the call.
int access_with_flags(int dirfd, const char* path, int mode, int flags) {
  auto* next = g_observer.next_faccessat;
  if (next == nullptr) {
    next = reinterpret_cast<int (*)(int, const char*, int, int)>(::dlsym(RTLD_NEXT, "faccessat"));
  }
  if (next != nullptr) {
    return next(dirfd, path, mode, flags);
  }
  const int saved = errno;
  return static_cast<int>(
      returned(notified(k_faccessat2_number, dirfd, reinterpret_cast<long>(path), mode, flags), saved));
}

int access_path(int dirfd, const char* path, int mode, int flags) {
  if (flags != 0) {
    return access_with_flags(dirfd, path, mode, flags);
  }
  const int saved = errno;
  Datagram datagram;
  if (!observing() || !take_path(dirfd, path, datagram)) {
    return static_cast<int>(returned(notified(SYS_faccessat, dirfd, reinterpret_cast<long>(path), mode, 0), saved));
  }
  const long result = unnotified(SYS_faccessat, dirfd, reinterpret_cast<long>(path), mode, 0);
  report_look_up_failure(datagram, result);
  return static_cast<int>(returned(result, saved));
}

// Whether the program at `path` is missing, so that its execve would fail
// with ENOENT or ENOTDIR before anything ran: then the look-up is made
// through the page and recorded absent (as the tracer records a notified
// execve of a missing path), and errno is set as that execve would set it.
// False: the execve is to be made, notified.
bool program_missing(const char* path) {
  Datagram datagram;
  if (!g_observer.exec_opens_first || !observing() || !take_path(AT_FDCWD, path, datagram) ||
      datagram.path[datagram.header.path_size - 1] == '/') {  // "prog/" names no directory: ENOTDIR, yet prog is there
    return false;
  }
  struct stat info {};
  const long result =
      unnotified(SYS_newfstatat, AT_FDCWD, reinterpret_cast<long>(path), reinterpret_cast<long>(&info), 0);
  if (result != -ENOENT && result != -ENOTDIR) {
    return false;
  }
  report(datagram, RecordAccess::absent, 0);
  errno = static_cast<int>(-result);
  return true;
}

// execve(2), notified, unless the program is missing; on failure -1, errno set.
int execute(const char* path, char* const argv[], char* const envp[]) {
  if (program_missing(path)) {
    return -1;
  }
  return static_cast<int>(::syscall(SYS_execve, path, argv, envp));
}

// A file without a #! line that execve refused (ENOEXEC), run by /bin/sh
// as the C library's execvp does: the shell, the file, then argv after its
// first element.
void execute_script(const char* file, char* const argv[], char* const envp[]) {
  std::size_t count = 0;
  while (argv[count] != nullptr) {
    ++count;
  }
  const std::size_t slots = count > 1 ? count + 2 : 3;
  auto** shell_argv = static_cast<char**>(__builtin_alloca(slots * sizeof(char*)));
  shell_argv[0] = const_cast<char*>("/bin/sh");
  shell_argv[1] = const_cast<char*>(file);
  if (count > 1) {
    std::memcpy(shell_argv + 2, argv + 1, count * sizeof(char*));  // argv[1..count], its null included
  } else {
    shell_argv[2] = nullptr;
  }
  execute(shell_argv[0], shell_argv, envp);
}

// The C library's execvpe (glibc 2.36's posix/execvpe.c), whose execve is
// internal and so notified for every directory of PATH a program is not in
// (a compiler driver running `as`: one notification per directory before
// /usr/bin). The same walk (an empty entry is the working directory; no
// PATH: "/bin:/usr/bin"), the same errors and the same fallback to /bin/sh,
// with execute() for each candidate. Differences: a name longer than
// NAME_MAX fails with ENAMETOOLONG before any execve (as the execve would),
// and a null name with ENOENT.
int execute_searching(const char* file, char* const argv[], char* const envp[]) {
  if (file == nullptr || file[0] == '\0') {
    errno = ENOENT;
    return -1;
  }
  if (std::strchr(file, '/') != nullptr) {
    execute(file, argv, envp);
    if (errno == ENOEXEC) {
      execute_script(file, argv, envp);
    }
    return -1;
  }
  const char* search = std::getenv("PATH");
  if (search == nullptr) {
    search = "/bin:/usr/bin";
  }
  const std::size_t file_size = ::strnlen(file, NAME_MAX + 1) + 1;
  if (file_size > NAME_MAX + 1) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const std::size_t search_size = ::strnlen(search, PATH_MAX - 1) + 1;
  auto* candidate = static_cast<char*>(__builtin_alloca(search_size + file_size + 1));
  bool refused = false;  // some candidate was there but not executable: EACCES, as the C library reports
  for (const char* entry = search;;) {
    const char* end = ::strchrnul(entry, ':');
    const auto length = static_cast<std::size_t>(end - entry);
    if (length >= search_size) {
      // As the C library: an entry too long for its buffer is skipped, and
      // the ':' after it starts an empty entry (the working directory).
      if (*end == '\0') {
        break;
      }
      entry = end;
      continue;
    }
    char* slash = static_cast<char*>(::mempcpy(candidate, entry, length));
    *slash = '/';
    std::memcpy(slash + (length > 0 ? 1 : 0), file, file_size);
    execute(candidate, argv, envp);
    if (errno == ENOEXEC) {
      execute_script(candidate, argv, envp);  // the shell's failure decides, as in the C library
    }
    switch (errno) {
      case EACCES:
        refused = true;
        break;
      case ENOENT:
      case ESTALE:
      case ENOTDIR:
      case ENODEV:
      case ETIMEDOUT:
        break;
      default:
        return -1;
    }
    if (*end == '\0') {
      break;
    }
    entry = end + 1;
  }
  if (refused) {
    errno = EACCES;
  }
  return -1;
}

}  // namespace

// The C library's entry points, interposed. Their declarations in the C
// library's headers are matched (noexcept where they say __THROW).
extern "C" {

__attribute__((visibility("default"))) int open(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  return open_file(AT_FDCWD, path, flags, mode);
}


__attribute__((visibility("default"))) int openat(int dirfd, const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  return open_file(dirfd, path, flags, mode);
}

// The large-file names are the same functions on a 64-bit system.
__attribute__((visibility("default"), alias("open"))) int open64(const char* path, int flags, ...);
__attribute__((visibility("default"), alias("openat"))) int openat64(int dirfd, const char* path, int flags, ...);

// _FORTIFY_SOURCE's checked opens: called without a mode (never creating).
__attribute__((visibility("default"))) int __open_2(const char* path, int flags) {
  return open_file(AT_FDCWD, path, flags, 0);
}
__attribute__((visibility("default"), alias("__open_2"))) int __open64_2(const char* path, int flags);
__attribute__((visibility("default"))) int __openat_2(int dirfd, const char* path, int flags) {
  return open_file(dirfd, path, flags, 0);
}
__attribute__((visibility("default"), alias("__openat_2"))) int __openat64_2(int dirfd, const char* path, int flags);

__attribute__((visibility("default"))) int stat(const char* path, struct stat* buffer) noexcept {
  return stat_path(AT_FDCWD, path, buffer, 0);
}
__attribute__((visibility("default"))) int stat64(const char* path, struct stat64* buffer) noexcept {
  return stat_path(AT_FDCWD, path, reinterpret_cast<struct stat*>(buffer), 0);
}
__attribute__((visibility("default"))) int lstat(const char* path, struct stat* buffer) noexcept {
  return stat_path(AT_FDCWD, path, buffer, AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int lstat64(const char* path, struct stat64* buffer) noexcept {
  return stat_path(AT_FDCWD, path, reinterpret_cast<struct stat*>(buffer), AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int fstatat(int dirfd, const char* path, struct stat* buffer,
                                                   int flags) noexcept {
  return stat_path(dirfd, path, buffer, flags);
}
__attribute__((visibility("default"))) int fstatat64(int dirfd, const char* path, struct stat64* buffer,
                                                     int flags) noexcept {
  return stat_path(dirfd, path, reinterpret_cast<struct stat*>(buffer), flags);
}

// The entry points of programs built against a C library before 2.33
// (nvcc's): the version argument names the kernel's layout on x86_64.
__attribute__((visibility("default"))) int __xstat(int, const char* path, struct stat* buffer) {
  return stat_path(AT_FDCWD, path, buffer, 0);
}
__attribute__((visibility("default"))) int __xstat64(int, const char* path, struct stat* buffer) {
  return stat_path(AT_FDCWD, path, buffer, 0);
}
__attribute__((visibility("default"))) int __lxstat(int, const char* path, struct stat* buffer) {
  return stat_path(AT_FDCWD, path, buffer, AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int __lxstat64(int, const char* path, struct stat* buffer) {
  return stat_path(AT_FDCWD, path, buffer, AT_SYMLINK_NOFOLLOW);
}
__attribute__((visibility("default"))) int __fxstatat(int, int dirfd, const char* path, struct stat* buffer,
                                                      int flags) {
  return stat_path(dirfd, path, buffer, flags);
}
__attribute__((visibility("default"))) int __fxstatat64(int, int dirfd, const char* path, struct stat* buffer,
                                                        int flags) {
  return stat_path(dirfd, path, buffer, flags);
}

__attribute__((visibility("default"))) int access(const char* path, int mode) noexcept {
  return access_path(AT_FDCWD, path, mode, 0);
}
__attribute__((visibility("default"))) int faccessat(int dirfd, const char* path, int mode, int flags) noexcept {
  return access_path(dirfd, path, mode, flags);
}

__attribute__((visibility("default"))) int execve(const char* path, char* const argv[], char* const envp[]) noexcept {
  return execute(path, argv, envp);
}
__attribute__((visibility("default"))) int execvpe(const char* file, char* const argv[], char* const envp[]) noexcept {
  return execute_searching(file, argv, envp);
}
__attribute__((visibility("default"))) int execvp(const char* file, char* const argv[]) noexcept {
  return execute_searching(file, argv, environ);
}
__attribute__((visibility("default"))) int execlp(const char* file, const char* argument, ...) noexcept {
  va_list arguments;
  va_start(arguments, argument);
  std::size_t count = 1;
  while (va_arg(arguments, const char*) != nullptr) {
    ++count;
  }
  va_end(arguments);
  auto** argv = static_cast<char**>(__builtin_alloca((count + 1) * sizeof(char*)));
  argv[0] = const_cast<char*>(argument);
  va_start(arguments, argument);
  for (std::size_t i = 1; i <= count; ++i) {
    argv[i] = const_cast<char*>(va_arg(arguments, const char*));  // the last one is the null
  }
  va_end(arguments);
  return execute_searching(file, argv, environ);
}

}  // extern "C"
