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
    ::unlink(pending.temp.c_str());
  }
}

Status DirectorySink::begin(const MemberEntry& member) {
  // Names were validated with the manifest; re-check because this is the
  // line where a name becomes a path.
  OPCACHE_TRY(check_member_name(member.name));
  auto temp = m_directory / (".opcache-" + base::random_token() + ".tmp");
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    return base::errno_error("cannot create", temp, errno);
  }
  m_current = base::FileDescriptor(fd);
  m_pending.push_back({temp, m_directory / member.name});
  return {};
}

Status DirectorySink::write(const char* data, std::size_t size) {
  return base::write_all(m_current.get(), data, size, m_pending.back().temp);
}

Status DirectorySink::end(const MemberEntry&) {
  if (::close(m_current.release()) != 0) {
    return base::errno_error("cannot close", m_pending.back().temp, errno);
  }
  return {};
}

Result<std::vector<std::filesystem::path>> DirectorySink::commit() {
  std::vector<std::filesystem::path> published;
  for (const auto& pending : m_pending) {
    // rename() replaces a symlink at the target itself; it never writes
    // through it; and it refuses to replace a directory (EISDIR), so no lstat first.
    if (::rename(pending.temp.c_str(), pending.target.c_str()) != 0) {
      if (errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST) {
        return Error::io("cannot write " + pending.target.string() + ": a directory is in the way");
      }
      return base::errno_error("cannot rename into place", pending.target, errno);
    }
    published.push_back(pending.target);
  }
  m_pending.clear();
  return published;
}

}  // namespace opcache::store
