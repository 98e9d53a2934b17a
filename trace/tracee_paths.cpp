#include "trace/tracee_paths.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::trace {

namespace {

constexpr std::string_view k_deleted_suffix = " (deleted)";

bool has_prefix_directory(std::string_view path, std::string_view directory) {
  return path.substr(0, directory.size()) == directory &&
         (path.size() == directory.size() || path[directory.size()] == '/');
}

// The target of the /proc link `link`, or std::nullopt when it does not exist.
Result<std::optional<std::string>> read_proc_link(const std::string& link) {
  char buffer[8192];
  const ssize_t length = ::readlink(link.c_str(), buffer, sizeof buffer);
  if (length < 0) {
    if (errno == ENOENT) {
      return std::optional<std::string>();
    }
    return Error::io("cannot read " + link + ": " + std::strerror(errno));
  }
  if (static_cast<std::size_t>(length) == sizeof buffer) {
    return Error::io("cannot read " + link + ": its target is too long");
  }
  return std::optional<std::string>(std::string(buffer, static_cast<std::size_t>(length)));
}

// Whether the file /proc link `link` leads to has been removed (its target
// then ends with " (deleted)", which a live file's name may also do).
bool link_target_deleted(const std::string& link, const std::string& target) {
  if (target.size() < k_deleted_suffix.size() ||
      target.compare(target.size() - k_deleted_suffix.size(), k_deleted_suffix.size(), k_deleted_suffix) != 0) {
    return false;
  }
  struct stat info {};
  return ::stat(link.c_str(), &info) == 0 && info.st_nlink == 0;
}

// The directory or file /proc/<tid>/<entry> leads to: as tracee_descriptor_path.
Result<std::optional<std::string>> proc_entry_path(pid_t tid, const std::string& entry) {
  const std::string link = "/proc/" + std::to_string(tid) + "/" + entry;
  OPCACHE_TRY_ASSIGN(const auto target, read_proc_link(link));
  if (!target || target->empty() || target->front() != '/') {
    return std::optional<std::string>();
  }
  if (link_target_deleted(link, *target)) {
    return Error::io("process " + std::to_string(tid) + " uses a deleted directory or file (" + *target + ")");
  }
  return std::optional<std::string>(normal_path(*target));
}

// `path` (normal) with /proc/self, /proc/thread-self and /dev/fd replaced
// by what they mean to thread `tid`: /proc/<tid>, /proc/<tid>/fd.
std::string as_seen_by(pid_t tid, std::string path) {
  const std::string own = "/proc/" + std::to_string(tid);
  for (const std::string_view self : {std::string_view("/proc/self"), std::string_view("/proc/thread-self")}) {
    if (has_prefix_directory(path, self)) {
      return own + path.substr(self.size());
    }
  }
  if (has_prefix_directory(path, "/dev/fd")) {
    return own + "/fd" + path.substr(std::string_view("/dev/fd").size());
  }
  return path;
}

// Whether `text` is a non-empty run of decimal digits.
bool is_number(std::string_view text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// `path` (normal) through a process's magic link, /proc/<pid>/cwd, root or
// fd/<n>: the file it leads to, the link's target with the rest of `path`
// appended (the kernel opens that file; /proc/self/cwd/k.h reads k.h). The
// path as it is when it goes through none, or when the link leads to no path
// of a file (a pipe, a socket, a deleted file: nothing anyone can edit).
std::string through_proc_link(const std::string& path) {
  const std::string_view proc = "/proc/";
  if (path.compare(0, proc.size(), proc) != 0) {
    return path;
  }
  const std::size_t pid_end = std::min(path.find('/', proc.size()), path.size());
  if (!is_number(std::string_view(path).substr(proc.size(), pid_end - proc.size())) || pid_end == path.size()) {
    return path;
  }
  std::size_t link_end = std::min(path.find('/', pid_end + 1), path.size());
  const std::string_view entry = std::string_view(path).substr(pid_end + 1, link_end - pid_end - 1);
  if (entry == "fd" && link_end < path.size()) {
    const std::size_t fd_end = std::min(path.find('/', link_end + 1), path.size());
    if (!is_number(std::string_view(path).substr(link_end + 1, fd_end - link_end - 1))) {
      return path;
    }
    link_end = fd_end;
  } else if (entry != "cwd" && entry != "root") {
    return path;
  }
  const std::string link = path.substr(0, link_end);
  const auto target = read_proc_link(link);
  if (!target || !*target || (*target)->empty() || (*target)->front() != '/' || link_target_deleted(link, **target)) {
    return path;
  }
  return normal_path(**target + "/" + path.substr(link_end));
}

// Where the last ".." component of `path` ends; std::string_view::npos when
// it has none.
std::size_t end_of_last_dot_dot(std::string_view path) {
  std::size_t end = std::string_view::npos;
  for (std::size_t at = path.find(".."); at != std::string_view::npos; at = path.find("..", at + 1)) {
    if ((at == 0 || path[at - 1] == '/') && (at + 2 == path.size() || path[at + 2] == '/')) {
      end = at + 2;
    }
  }
  return end;
}

// `absolute` (not normal: as the tracee named it, or joined to its
// directory) as the kernel looks it up for thread `tid`, lexically normal:
// /proc/self and /dev/fd as tid's (as_seen_by), ".." as the parent of the
// directory reached so far, after any symlink that led there, not the name
// written before it (link/../k.h is k.h beside what link points to): the
// part up to the last ".." is resolved with realpath(3), the rest appended;
// lexically when there is no ".." or that part does not resolve (the call
// fails there as well).
std::string looked_up_path(pid_t tid, const std::string& absolute) {
  if (end_of_last_dot_dot(absolute) != std::string::npos) {
    const std::string path = as_seen_by(tid, absolute);  // replaces a prefix that has no ".."
    const std::size_t end = end_of_last_dot_dot(path);
    char real[PATH_MAX];
    if (::realpath(path.substr(0, end).c_str(), real) != nullptr) {
      return as_seen_by(tid, normal_path(std::string(real) + "/" + path.substr(end)));
    }
  }
  return as_seen_by(tid, normal_path(absolute));
}

}  // namespace

std::string normal_path(std::string_view absolute) {
  // One pass over the components (std::filesystem's lexically_normal took
  // a microsecond a path, as long as the tracer's stat of it).
  std::string normal;
  normal.reserve(absolute.size());
  std::size_t start = 0;
  while (start < absolute.size()) {
    const std::size_t slash = std::min(absolute.find('/', start), absolute.size());
    const std::string_view component = absolute.substr(start, slash - start);
    if (component == "..") {
      normal.resize(normal.empty() ? 0 : normal.rfind('/'));
    } else if (!component.empty() && component != ".") {
      normal.push_back('/');
      normal.append(component);
    }
    start = slash + 1;
  }
  return normal.empty() ? "/" : normal;
}

bool is_pseudo_file_path(std::string_view path) {
  if (has_prefix_directory(path, "/dev")) {
    // /dev/shm is a tmpfs of ordinary files (scratch trees, headers, models):
    // a compiler's read there is an input like any other.
    return !has_prefix_directory(path, "/dev/shm");
  }
  return has_prefix_directory(path, "/proc") || has_prefix_directory(path, "/sys");
}

std::string describe_tracee(pid_t tid) {
  std::string text = "process " + std::to_string(tid);
  base::FileDescriptor comm(::open(("/proc/" + std::to_string(tid) + "/comm").c_str(), O_RDONLY | O_CLOEXEC));
  char name[64];
  const ssize_t length = comm.valid() ? ::read(comm.get(), name, sizeof name) : -1;
  if (length > 0) {
    text += " (" + std::string(name, static_cast<std::size_t>(length - (name[length - 1] == '\n' ? 1 : 0))) + ")";
  }
  return text;
}

Result<std::optional<std::string>> tracee_descriptor_path(pid_t tid, int fd) {
  if (fd < 0) {
    return std::optional<std::string>();
  }
  return proc_entry_path(tid, "fd/" + std::to_string(fd));
}

Result<std::optional<std::string>> resolve_tracee_path(pid_t tid, int dirfd, const std::string& path) {
  if (path.empty()) {
    return std::optional<std::string>();
  }
  if (path.front() == '/') {
    return std::optional<std::string>(through_proc_link(looked_up_path(tid, path)));
  }
  OPCACHE_TRY_ASSIGN(const auto directory,
                     dirfd == AT_FDCWD ? proc_entry_path(tid, "cwd") : tracee_descriptor_path(tid, dirfd));
  if (!directory) {
    return std::optional<std::string>();
  }
  return std::optional<std::string>(through_proc_link(looked_up_path(tid, *directory + "/" + path)));
}

}  // namespace opcache::trace
