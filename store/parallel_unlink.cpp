#include "store/parallel_unlink.hpp"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <optional>
#include <system_error>
#include <thread>

#include "base/file_io.hpp"
#include "base/mutex.hpp"

namespace opcache::store {

namespace {

constexpr std::size_t k_max_threads = 8;
// Below this many files a thread costs more than the overlap saves.
constexpr std::size_t k_files_per_thread = 8;

// The first error any thread met; the others are dropped.
class FirstUnlinkError {
 public:
  void record(Error error) EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    if (!m_error) {
      m_error = std::move(error);
    }
  }

  Status status() EXCLUDES(m_mutex) {
    base::MutexLock lock(m_mutex);
    if (m_error) {
      return *m_error;
    }
    return {};
  }

 private:
  base::Mutex m_mutex;
  std::optional<Error> m_error GUARDED_BY(m_mutex);
};

}  // namespace

Status unlink_all(const std::vector<std::filesystem::path>& paths) {
  std::atomic<std::size_t> next{0};
  FirstUnlinkError first_error;
  auto work = [&] {
    for (std::size_t i = next++; i < paths.size(); i = next++) {
      if (::unlink(paths[i].c_str()) != 0 && errno != ENOENT) {
        const int error = errno;
        first_error.record(base::errno_error("cannot remove", paths[i], error));
      }
    }
  };
  const std::size_t threads = std::min(k_max_threads, paths.size() / k_files_per_thread);
  std::vector<std::thread> pool;
  try {
    for (std::size_t t = 1; t < threads; ++t) {
      pool.emplace_back(work);
    }
  } catch (const std::system_error&) {
    // No more threads: the ones started, and this one, do the rest.
  }
  work();
  for (auto& thread : pool) {
    thread.join();
  }
  return first_error.status();
}

}  // namespace opcache::store
