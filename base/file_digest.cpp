#include "base/file_digest.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <vector>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::base {

namespace fs = std::filesystem;

namespace {

// What decides whether a remembered digest still holds: the line stored in
// front of the digest in the entry file.
Result<std::string> file_identity(const fs::path& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) {
    return errno_error("cannot stat", path, errno);
  }
  if (!S_ISREG(info.st_mode)) {
    return Error::io(path.string() + " is not a regular file");
  }
  return std::to_string(info.st_size) + " " + std::to_string(info.st_mtim.tv_sec) + "." +
         std::to_string(info.st_mtim.tv_nsec) + " " + std::to_string(info.st_ino) + " " +
         std::to_string(info.st_dev) + " " + std::to_string(info.st_ctim.tv_sec) + "." +
         std::to_string(info.st_ctim.tv_nsec);
}

// Whether the file changed so recently that a later change could keep its
// identity: within the timestamp granularity of this moment (ccache's "too
// new" rule). ctime, which no one can set back, is what is compared.
bool changed_too_recently(const fs::path& path) {
  struct stat info {};
  timespec now {};
  if (::stat(path.c_str(), &info) != 0 || ::clock_gettime(CLOCK_REALTIME, &now) != 0) {
    return true;
  }
  const auto changed_ns = static_cast<std::int64_t>(info.st_ctim.tv_sec) * 1000000000 + info.st_ctim.tv_nsec;
  const auto now_ns = static_cast<std::int64_t>(now.tv_sec) * 1000000000 + now.tv_nsec;
  return now_ns - changed_ns < DigestCache::kTooNewNs;
}

}  // namespace

Result<std::string> file_sha256(const fs::path& path) {
  OPCACHE_TRY_ASSIGN(auto fd, open_for_reading(path));
  return sha256_hex_of_file(fd.get(), path);
}

DigestCache::DigestCache(fs::path directory) : m_directory(std::move(directory)) {}

Result<std::string> DigestCache::digest(const fs::path& path, std::string_view method, const Compute& compute) const {
  if (m_directory.empty()) {
    return compute(path);
  }
  const fs::path absolute = fs::absolute(path).lexically_normal();
  OPCACHE_TRY_ASSIGN(auto identity, file_identity(absolute));
  const std::string header = std::string(method) + " " + absolute.string() + "\n" + identity + "\n";
  const fs::path entry = m_directory / sha256_hex(std::string(method) + "\n" + absolute.string());
  if (auto stored = read_small_file(entry, 8192); stored && stored->starts_with(header)) {
    std::string value = stored->substr(header.size());
    if (!value.empty() && value.back() == '\n') {
      value.pop_back();
      return value;
    }
  }
  OPCACHE_TRY_ASSIGN(auto value, compute(absolute));
  // Remember it only if the file did not change while it was read, nor so
  // recently that it could change again without changing its identity.
  if (auto after = file_identity(absolute);
      after && *after == identity && !changed_too_recently(absolute) && ensure_directory(m_directory)) {
    (void)write_file_atomic(entry, header + value + "\n");
  }
  return value;
}

Result<std::string> DigestCache::file_sha256(const fs::path& path) const {
  std::error_code ec;
  if (const auto size = fs::file_size(path, ec); !ec && size < kRememberedFrom) {
    return base::file_sha256(path);
  }
  return digest(path, "sha256", [](const fs::path& file) { return base::file_sha256(file); });
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
