#include "store/cache_root.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

using base::SafeDirectory;

std::string octal(unsigned mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", mode & 07777);
  return text;
}

// The StrictModes rule: another user's directory that group or others may
// write lets them plant files and symlinks where this process writes.
bool owner_is_safe(base::DirectoryStatus status, Sharing sharing) {
  return sharing == Sharing::group || status.owner == ::geteuid() || (status.mode & (S_IWGRP | S_IWOTH)) == 0;
}

Error unsafe_owner_error(base::DirectoryStatus status, const std::filesystem::path& display) {
  return Error::usage("cache directory " + display.string() + " is owned by uid " + std::to_string(status.owner) +
                      ", not by you (uid " + std::to_string(::geteuid()) +
                      "), and group or others may write to it (mode " + octal(status.mode) +
                      "): another user could plant files or symlinks there. Use a directory of your own "
                      "(--cache-dir), remove the group and other write permission, or pass --shared-group "
                      "(OPCACHE_SHARED_GROUP=true) if a team shares it on purpose");
}

Status check_owner(const SafeDirectory& directory, Sharing sharing) {
  const base::DirectoryStatus status{directory.owner(), directory.mode()};
  if (owner_is_safe(status, sharing)) {
    return {};
  }
  return unsafe_owner_error(status, directory.display_path());
}

// With Sharing::group: group-writable and setgid when this process owns it.
Status share(const SafeDirectory& directory, Sharing sharing) {
  if (sharing != Sharing::group) {
    return {};
  }
  return base::share_with_group_like(S_ISGID | S_IWGRP, directory.fd(), directory.display_path());
}

Result<SafeDirectory> checked_child(const SafeDirectory& parent, const std::string& name, bool create,
                                    Sharing sharing) {
  OPCACHE_TRY_ASSIGN(SafeDirectory child, parent.child(name, create));
  OPCACHE_TRY(check_owner(child, sharing));
  OPCACHE_TRY(share(child, sharing));
  return child;
}

// checked_child for a directory that is only checked, not worked in: an
// existing one by its status alone (nothing to open unless the store is
// group-shared, where it may need its mode set). False when it is missing
// and `create` is false.
Result<bool> check_child(const SafeDirectory& parent, const std::string& name, bool create, Sharing sharing) {
  if (sharing != Sharing::group) {
    OPCACHE_TRY_ASSIGN(const auto status, parent.child_status(name));
    if (status) {
      if (!owner_is_safe(*status, sharing)) {
        return unsafe_owner_error(*status, parent.display_path() / name);
      }
      return true;
    }
    if (!create) {
      return false;
    }
  }
  auto child = checked_child(parent, name, create, sharing);
  if (!child) {
    return child.error().code() == ErrorCode::not_found && !create ? Result<bool>(false) : Result<bool>(child.error());
  }
  return true;
}

// SQLite follows symlinks: a planted index.db (or -wal, -shm) link would
// make it write wherever the link points. The hit journal is opened with
// O_NOFOLLOW, but a planted link would make every hit fail to record.
Status check_index_files(const SafeDirectory& root) {
  for (const char* name : {"index.db", "index.db-wal", "index.db-shm", "hits.journal"}) {
    struct stat info {};
    if (::fstatat(root.fd(), name, &info, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(info.st_mode)) {
      return Error::usage((root.display_path() / name).string() +
                          (S_ISLNK(info.st_mode) ? " is a symlink" : " is not a regular file") +
                          "; refusing to open the index through it (remove it)");
    }
  }
  return {};
}

// With Sharing::group the index is created here, group-writable, before
// SQLite creates it with the umask's mode.
Status create_shared_index(const SafeDirectory& root) {
  int fd = ::openat(root.fd(), "index.db", O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    return base::errno_error("cannot create", root.display_path() / "index.db", errno);
  }
  base::FileDescriptor index(fd);
  return base::share_with_group_like(S_ISGID | S_IWGRP, fd, root.display_path() / "index.db");
}

}  // namespace

Result<CacheRoot> resolve_cache_root(const std::optional<fs::path>& flag, const EnvLookup& env) {
  if (flag && !flag->empty()) {
    return CacheRoot{*flag, "--cache-dir"};
  }
  auto non_empty = [&env](const char* name) {
    auto value = env(name);
    return value && !value->empty() ? value : std::nullopt;
  };
  if (auto dir = non_empty("OPCACHE_DIR")) {
    return CacheRoot{*dir, "OPCACHE_DIR"};
  }
  if (auto xdg = non_empty("XDG_CACHE_HOME")) {
    return CacheRoot{fs::path(*xdg) / "opcache", "XDG_CACHE_HOME"};
  }
  if (auto home = non_empty("HOME")) {
    return CacheRoot{fs::path(*home) / ".cache" / "opcache", "HOME"};
  }
  return Error::usage("no cache directory: pass --cache-dir DIR or set OPCACHE_DIR (HOME is not set either)");
}

fs::path StoreLayout::object_path(const std::string& digest) const {
  std::string text = m_root.native();
  if (!text.empty() && text.back() != '/') {
    text += '/';
  }
  text += "objects/";
  text.append(digest, 0, 2);
  text += '/';
  text += digest;
  return fs::path(std::move(text));
}

Status StoreLayout::create_directories() const {
  OPCACHE_TRY_ASSIGN(SafeDirectory root, SafeDirectory::open_root(m_root, /*create=*/true));
  OPCACHE_TRY(check_owner(root, m_sharing));
  OPCACHE_TRY(check_index_files(root));
  OPCACHE_TRY(share(root, m_sharing));
  for (const char* name : {"objects", "tmp", "locks"}) {
    OPCACHE_TRY(check_child(root, name, /*create=*/true, m_sharing));
  }
  for (const char* name : {"outbox", "remotes", "digests", "revocations", "keys"}) {
    OPCACHE_TRY(check_child(root, name, /*create=*/false, m_sharing));
  }
  if (m_sharing == Sharing::group) {
    OPCACHE_TRY(create_shared_index(root));
  }
  return {};
}

Status StoreLayout::ensure_directory(const fs::path& directory) const {
  const auto relative = directory.lexically_relative(m_root);
  if (relative.empty() || relative == "." || *relative.begin() == "..") {
    return Error::usage(directory.string() + " is not below the cache directory " + m_root.string());
  }
  OPCACHE_TRY_ASSIGN(SafeDirectory current, SafeDirectory::open_root(m_root, /*create=*/false));
  for (const auto& component : relative) {
    OPCACHE_TRY_ASSIGN(current, checked_child(current, component.string(), /*create=*/true, m_sharing));
  }
  return {};
}

}  // namespace opcache::store
