#include "base/file_digest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/file_io.hpp"
#include "base/mutex.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::base {

namespace fs = std::filesystem;

namespace {

// What decides whether a remembered digest still holds: the line stored in
// front of the digest in the entry file. `info` describes a regular file.
std::string identity_line(const struct stat& info) {
  return std::to_string(info.st_size) + " " + std::to_string(info.st_mtim.tv_sec) + "." +
         std::to_string(info.st_mtim.tv_nsec) + " " + std::to_string(info.st_ino) + " " +
         std::to_string(info.st_dev) + " " + std::to_string(info.st_ctim.tv_sec) + "." +
         std::to_string(info.st_ctim.tv_nsec);
}

Result<struct stat> stat_regular(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return errno_error("cannot stat", path, errno);
  }
  if (!S_ISREG(info.st_mode)) {
    return Error::io(path.string() + " is not a regular file");
  }
  return info;
}

// Whether the file at `path` still has `identity` and did not change too
// recently to be trusted with it: a digest just computed may be remembered.
bool held_still(const fs::path& path, const std::string& identity) {
  const auto after = stat_regular(path);
  return after && identity_line(*after) == identity &&
         DigestCache::settled(static_cast<std::int64_t>(after->st_ctim.tv_sec) * 1'000'000'000 + after->st_ctim.tv_nsec);
}

}  // namespace

// Digests remembered by this process: by method and path, with the identity
// each was computed for.
struct DigestCache::Memory {
  Mutex mutex;
  std::unordered_map<std::string, std::pair<std::string, std::string>> digests
      GUARDED_BY(mutex);  // name -> (identity, digest)

  std::optional<std::string> find(const std::string& name, const std::string& identity) EXCLUDES(mutex) {
    MutexLock lock(mutex);
    const auto found = digests.find(name);
    if (found == digests.end() || found->second.first != identity) {
      return std::nullopt;
    }
    return found->second.second;
  }

  void remember(const std::string& name, const std::string& identity, const std::string& digest) EXCLUDES(mutex) {
    MutexLock lock(mutex);
    digests[name] = {identity, digest};
  }
};

Result<std::string> file_sha256(const fs::path& path) {
  OPCACHE_TRY_ASSIGN(auto fd, open_for_reading(path));
  return sha256_hex_of_file(fd.get(), path);
}

bool DigestCache::settled(std::int64_t ctime_ns) {
  timespec now {};
  if (::clock_gettime(CLOCK_REALTIME, &now) != 0) {
    return false;
  }
  const auto now_ns = static_cast<std::int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
  return now_ns - ctime_ns >= kTooNewNs;
}

DigestCache::DigestCache(fs::path directory)
    : m_directory(std::move(directory)), m_memory(m_directory.empty() ? nullptr : std::make_shared<Memory>()) {}

Result<std::string> DigestCache::lookup(const fs::path& path, std::string_view method, const Compute& compute,
                                        std::uintmax_t on_disk_from) const {
  const fs::path absolute = fs::absolute(path).lexically_normal();
  OPCACHE_TRY_ASSIGN(const auto info, stat_regular(absolute));
  const bool on_disk = static_cast<std::uintmax_t>(info.st_size) >= on_disk_from;
  const std::string identity = identity_line(info);
  const std::string name = std::string(method) + "\n" + absolute.string();
  if (auto remembered = m_memory->find(name, identity)) {
    return *remembered;
  }
  const std::string header = std::string(method) + " " + absolute.string() + "\n" + identity + "\n";
  const fs::path entry = m_directory / sha256_hex(name);
  if (on_disk) {
    if (auto stored = read_small_file(entry, 8192); stored && stored->starts_with(header) && stored->ends_with("\n")) {
      std::string value = stored->substr(header.size(), stored->size() - header.size() - 1);
      if (!value.empty()) {
        m_memory->remember(name, identity, value);
        return value;
      }
    }
  }
  OPCACHE_TRY_ASSIGN(auto value, compute(absolute));
  if (held_still(absolute, identity)) {
    m_memory->remember(name, identity, value);
    if (on_disk && ensure_directory(m_directory)) {
      (void)write_file_atomic(entry, header + value + "\n", Durability::deferred);
    }
  }
  return value;
}

Result<std::string> DigestCache::digest(const fs::path& path, std::string_view method, const Compute& compute) const {
  if (m_directory.empty()) {
    return compute(path);
  }
  return lookup(path, method, compute, 0);
}

Result<std::string> DigestCache::file_sha256(const fs::path& path) const {
  if (m_directory.empty()) {
    return base::file_sha256(path);
  }
  return lookup(path, "sha256", [](const fs::path& file) { return base::file_sha256(file); }, kRememberedFrom);
}

Result<std::string> tree_sha256(const fs::path& directory, const DigestCache& cache,
                                const std::function<bool(const fs::path&)>& skip) {
  std::error_code ec;
  std::vector<std::pair<std::string, fs::path>> files;
  fs::recursive_directory_iterator it(directory, fs::directory_options::none, ec);
  if (ec) {
    return errno_error("cannot read directory", directory, ec.value());
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) {
      return errno_error("cannot read directory", it->path(), ec.value());
    }
    if (it->is_regular_file(ec) && !(skip && skip(it->path()))) {
      files.emplace_back(it->path().lexically_relative(directory).generic_string(), it->path());
    }
  }
  if (ec) {
    return errno_error("cannot read directory", directory, ec.value());
  }
  std::sort(files.begin(), files.end());
  Sha256 tree;
  for (const auto& [relative, file] : files) {
    OPCACHE_TRY_ASSIGN(auto digest, cache.file_sha256(file));
    tree.update(relative + "\t" + digest + "\n");
  }
  return tree.finish_hex();
}

}  // namespace opcache::base
