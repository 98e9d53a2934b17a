#include "trace/access_classifier.hpp"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "trace/exec_image.hpp"
#include "trace/seccomp_filter.hpp"
#include "trace/tracee_memory.hpp"
#include "trace/tracee_paths.hpp"

namespace opcache::trace {

namespace {

// What this process finds at a path.
struct PathState {
  enum class Kind { missing, regular, directory, other, unknown };
  Kind kind = Kind::unknown;
  std::optional<FileIdentity> identity;  ///< for a regular file

  bool exists() const { return kind == Kind::regular || kind == Kind::directory || kind == Kind::other; }
};

// The state of `path`, through a final symlink when `follow`.
PathState probe_path(const std::string& path, bool follow) {
  struct stat info {};
  if ((follow ? ::stat(path.c_str(), &info) : ::lstat(path.c_str(), &info)) != 0) {
    const bool missing = errno == ENOENT || errno == ENOTDIR;
    return PathState{missing ? PathState::Kind::missing : PathState::Kind::unknown, std::nullopt};
  }
  if (S_ISREG(info.st_mode)) {
    return PathState{PathState::Kind::regular, identity_of_stat(info)};
  }
  return PathState{S_ISDIR(info.st_mode) ? PathState::Kind::directory : PathState::Kind::other, std::nullopt};
}

bool writes_on_open(unsigned flags) {
  const unsigned mode = flags & O_ACCMODE;
  return mode == O_WRONLY || mode == O_RDWR || (flags & (O_CREAT | O_TRUNC)) != 0;
}

// One seccomp stop of a call of `rule`, classified into `log`.
class StopClassifier {
 public:
  StopClassifier(const SyscallStop& stop, const SyscallRule& rule, EventLog& log)
      : m_stop(stop), m_rule(rule), m_log(log) {}

  void classify() {
    switch (m_rule.op) {
      case SyscallOp::open:
        return classify_open(flags());
      case SyscallOp::open_how:
        return classify_open_how();
      case SyscallOp::exec:
        return classify_exec();
      case SyscallOp::look_up:
        return classify_look_up();
      case SyscallOp::list:
        return classify_list();
      case SyscallOp::remove:
        return classify_remove();
      case SyscallOp::rename:
        return classify_rename();
      case SyscallOp::create:
        return classify_create();
      case SyscallOp::truncate:
        return classify_truncate();
      case SyscallOp::unobservable:
        return m_log.set_blind(describe_tracee(m_stop.tid) + " called " + m_rule.name +
                               ", through which it can open files the tracer does not see");
      case SyscallOp::new_file_system_view:
        return classify_file_system_view();
    }
  }

 private:
  std::uint64_t argument(int index) const { return m_stop.arguments[static_cast<std::size_t>(index)]; }

  // The call's flags: those it implies and those of its flags argument.
  unsigned flags() const {
    const auto given =
        m_rule.flags_argument == k_no_argument ? 0U : static_cast<unsigned>(argument(m_rule.flags_argument));
    return m_rule.fixed_flags | given;
  }

  int descriptor(int index) const { return index == k_no_argument ? AT_FDCWD : static_cast<int>(argument(index)); }

  void go_blind(const std::string& what, const Error& error) {
    m_log.set_blind("cannot " + what + " of " + m_rule.name + " in " + describe_tracee(m_stop.tid) + ": " +
                    error.message());
  }

  // The path argument `index` as the tracee wrote it; std::nullopt when the
  // call names none (unreadable address: it fails) or it cannot be read (blind).
  std::optional<std::string> raw_path(int index) {
    auto text = read_tracee_string(m_stop.tid, argument(index));
    if (!text) {
      go_blind("read the path", text.error());
      return std::nullopt;
    }
    return std::move(*text);
  }

  std::optional<std::string> resolved(int dirfd_index, const std::string& raw) {
    auto path = resolve_tracee_path(m_stop.tid, descriptor(dirfd_index), raw);
    if (!path) {
      go_blind("resolve the path \"" + raw + "\"", path.error());
      return std::nullopt;
    }
    return std::move(*path);
  }

  // The path operand at (`dirfd_index`, `path_index`), absolute and normal;
  // std::nullopt for one under /proc, /sys or /dev, never an event.
  std::optional<std::string> path_operand(int dirfd_index, int path_index) {
    const auto raw = raw_path(path_index);
    auto path = raw ? resolved(dirfd_index, *raw) : std::nullopt;
    return path && is_pseudo_file_path(*path) ? std::nullopt : path;
  }

  std::optional<std::string> main_path() { return path_operand(m_rule.dirfd_argument, m_rule.path_argument); }

  void classify_open(unsigned open_flags) {
    if ((open_flags & O_TMPFILE) == O_TMPFILE) {
      return;  // an unnamed file in a directory: named later by linkat, if ever
    }
    const auto path = main_path();
    if (!path) {
      return;
    }
    const auto state = probe_path(*path, (open_flags & O_NOFOLLOW) == 0);
    // An O_PATH descriptor reads nothing itself, but reopening /proc/self/fd/N
    // reads its file under a path that names no file: a regular file opened
    // O_PATH is read here; anything else is a look-up.
    if ((open_flags & O_PATH) != 0 && state.kind != PathState::Kind::regular) {
      return record_look_up(*path, state);
    }
    if (writes_on_open(open_flags)) {
      if ((open_flags & O_ACCMODE) == O_RDWR && (open_flags & O_TRUNC) == 0 && state.kind == PathState::Kind::regular) {
        m_log.add(*path, Access::read, state.identity);
      }
      return m_log.add(*path, Access::written);
    }
    if (state.kind == PathState::Kind::missing) {
      return m_log.add(*path, Access::absent);
    }
    if (state.kind == PathState::Kind::regular || state.kind == PathState::Kind::other) {
      m_log.add(*path, Access::read, state.identity);
    }
  }

  // openat2: the open(2) flags and the resolve flags of its struct open_how
  // (their first and third fields). RESOLVE_IN_ROOT makes the directory
  // descriptor the root of the path ("/" and ".." stop there), a meaning
  // the tracer's resolution does not give it: blind.
  void classify_open_how() {
    std::uint64_t how[3] = {0, 0, 0};  // flags, mode, resolve
    auto readable = read_tracee_bytes(m_stop.tid, argument(m_rule.flags_argument), how, sizeof how);
    if (!readable) {
      return go_blind("read the struct open_how", readable.error());
    }
    if (!*readable) {
      return;
    }
    if ((how[2] & RESOLVE_IN_ROOT) != 0) {
      return m_log.set_blind(describe_tracee(m_stop.tid) +
                             " opened a path with openat2's RESOLVE_IN_ROOT, which the tracer does not resolve");
    }
    classify_open(static_cast<unsigned>(how[0]));
  }

  void classify_exec() {
    const auto raw = raw_path(m_rule.path_argument);
    if (!raw) {
      return;
    }
    std::optional<std::string> path;
    if (!raw->empty()) {
      path = resolved(m_rule.dirfd_argument, *raw);
    } else if ((flags() & AT_EMPTY_PATH) != 0) {
      auto named = tracee_descriptor_path(m_stop.tid, descriptor(m_rule.dirfd_argument));
      if (!named) {
        return go_blind("name the program", named.error());
      }
      path = std::move(*named);
    }
    if (path && is_pseudo_file_path(*path)) {
      path = real_program(*path);
    }
    if (path) {
      record_program(*path, 0);
    }
  }

  // The file a program named under /proc or /dev is (/proc/self/exe,
  // /dev/fd/3): where its links lead; blind when nowhere (a memfd).
  std::optional<std::string> real_program(const std::string& pseudo_path) {
    std::error_code error;
    const auto real = std::filesystem::canonical(pseudo_path, error);
    if (error || is_pseudo_file_path(real.string())) {
      m_log.set_blind("cannot tell which program " + describe_tracee(m_stop.tid) + " runs as " + pseudo_path);
      return std::nullopt;
    }
    return real.string();
  }

  // `program` run by the kernel (depth 0) or loaded by it as an interpreter.
  void record_program(const std::string& program, int depth) {
    const auto state = probe_path(program, true);
    if (state.kind == PathState::Kind::missing) {
      return m_log.add(program, Access::absent);
    }
    if (!state.exists()) {
      return;
    }
    m_log.add(program, Access::executed, state.identity);
    const auto interpreter = depth < k_max_interpreter_depth ? program_interpreter(program) : std::nullopt;
    if (interpreter) {
      if (const auto path = resolved(k_no_argument, *interpreter)) {
        record_program(*path, depth + 1);
      }
    }
  }

  // Blind when the call may give the tree a view of the file system the
  // tracer does not share (a namespace call without CLONE_NEWNS does not;
  // setns with 0 may join any namespace).
  void classify_file_system_view() {
    if (m_rule.flags_argument != k_no_argument) {
      const auto flags = argument(m_rule.flags_argument);
      const bool any_namespace = m_rule.number == SYS_setns && flags == 0;
      if ((flags & CLONE_NEWNS) == 0 && !any_namespace) {
        return;
      }
    }
    m_log.set_blind(describe_tracee(m_stop.tid) + " called " + m_rule.name +
                    ", after which its paths may name other files than the tracer's");
  }

  void record_look_up(const std::string& path, const PathState& state) {
    if (state.kind == PathState::Kind::missing) {
      m_log.add(path, Access::absent);
    }
  }

  void classify_look_up() {
    const auto raw = raw_path(m_rule.path_argument);
    if (!raw || raw->empty()) {
      return;  // an empty path is the descriptor's own file (AT_EMPTY_PATH) or fails
    }
    if (const auto path = resolved(m_rule.dirfd_argument, *raw)) {
      record_look_up(*path, probe_path(*path, (flags() & AT_SYMLINK_NOFOLLOW) == 0));
    }
  }

  void classify_list() {
    auto directory = tracee_descriptor_path(m_stop.tid, static_cast<int>(argument(m_rule.path_argument)));
    if (!directory) {
      return go_blind("name the directory", directory.error());
    }
    if (*directory) {
      m_log.add(**directory, Access::listed);
    }
  }

  // Records `present` for an existing `path` (through a final symlink when
  // `follow`), `absent` for a missing one; false when it does not exist.
  bool record_existing(const std::string& path, Access present, bool follow) {
    const auto state = probe_path(path, follow);
    if (state.kind == PathState::Kind::missing) {
      m_log.add(path, Access::absent);
    } else if (state.exists()) {
      m_log.add(path, present);
    }
    return state.exists();
  }

  void classify_remove() {
    if (const auto path = main_path()) {
      record_existing(*path, Access::removed, false);
    }
  }

  void classify_rename() {
    const auto source = main_path();
    const auto target = path_operand(m_rule.target_dirfd_argument, m_rule.target_path_argument);
    if (!source || !target) {
      return;
    }
    const bool exchange = (flags() & RENAME_EXCHANGE) != 0;
    if (record_existing(*source, exchange ? Access::written : Access::removed, false)) {
      m_log.add(*target, Access::written);
    }
  }

  void classify_create() {
    const auto path = main_path();
    if (path && probe_path(*path, false).kind == PathState::Kind::missing) {
      m_log.add(*path, Access::written);
    }
  }

  void classify_truncate() {
    if (const auto path = main_path()) {
      record_existing(*path, Access::written, true);
    }
  }

  const SyscallStop& m_stop;
  const SyscallRule& m_rule;
  EventLog& m_log;
};

std::string undecodable_convention(const SyscallStop& stop) {
  if (stop.filter_data == static_cast<std::uint32_t>(FilterVerdict::x32_call)) {
    return "an x32 program, " + describe_tracee(stop.tid) + ", made system calls the tracer cannot decode";
  }
  if ((stop.arch & __AUDIT_ARCH_64BIT) == 0) {
    return "a 32-bit program, " + describe_tracee(stop.tid) + ", made system calls the tracer cannot decode";
  }
  return "a program of another architecture, " + describe_tracee(stop.tid) +
         ", made system calls the tracer cannot decode";
}

}  // namespace

void classify_syscall(const SyscallStop& stop, EventLog& log) {
  const bool native =
      stop.filter_data == static_cast<std::uint32_t>(FilterVerdict::path_call) && stop.arch == native_audit_arch();
  if (!native) {
    if (!log.blind()) {  // every call of such a program stops: name it once
      log.set_blind(undecodable_convention(stop));
    }
    return;
  }
  const SyscallRule* rule = find_syscall_rule(stop.number);
  if (rule == nullptr) {
    return log.set_blind("the tracer stopped " + describe_tracee(stop.tid) + " in system call " +
                         std::to_string(stop.number) + ", which it does not decode");
  }
  StopClassifier(stop, *rule, log).classify();
}

}  // namespace opcache::trace
