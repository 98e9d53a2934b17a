#include "store/directory_sink.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/try.hpp"

namespace opcache::store {

DirectorySink::~DirectorySink() {
  m_current.reset();
  for (const auto& pending : m_pending) {
    ::unlinkat(m_directory_fd.get(), pending.temp.c_str(), 0);
  }
}

Status DirectorySink::open_directory() {
  if (m_directory_fd.valid()) {
    return {};
  }
  int fd = ::open(m_directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return base::errno_error("cannot open directory", m_directory, errno);
  }
  m_directory_fd = base::FileDescriptor(fd);
  return {};
}

Status DirectorySink::begin(const MemberEntry& member) {
  // Names were validated with the manifest; re-check because this is the
  // line where a name becomes a path.
  OPCACHE_TRY(check_member_name(member.name));
  OPCACHE_TRY(open_directory());
  auto temp = ".opcache-" + base::random_token() + ".tmp";
  int fd = ::openat(m_directory_fd.get(), temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return base::errno_error("cannot create", m_directory / temp, errno);
  }
  m_current = base::FileDescriptor(fd);
  m_pending.push_back({temp, member.name});
  return {};
}

Status DirectorySink::write(const char* data, std::size_t size) {
  return base::write_all(m_current.get(), data, size, m_directory / m_pending.back().temp);
}

Status DirectorySink::end(const MemberEntry&) {
  if (::close(m_current.release()) != 0) {
    return base::errno_error("cannot close", m_directory / m_pending.back().temp, errno);
  }
  return {};
}

Result<std::vector<std::filesystem::path>> DirectorySink::commit() {
  std::vector<std::filesystem::path> published;
  for (const auto& pending : m_pending) {
    const auto target = m_directory / pending.target;
    // rename() replaces a symlink at the target itself; it never writes
    // through it; and it refuses to replace a directory (EISDIR), so no lstat first.
    if (::renameat(m_directory_fd.get(), pending.temp.c_str(), m_directory_fd.get(), pending.target.c_str()) != 0) {
      if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
        return Error::io("cannot write " + target.string() + ": a directory is in the way");
      }
      return base::errno_error("cannot rename into place", target, errno);
    }
    published.push_back(target);
  }
  m_pending.clear();
  return published;
}

}  // namespace opcache::store
