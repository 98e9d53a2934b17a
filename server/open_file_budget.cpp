#include "server/open_file_budget.hpp"

#include <sys/resource.h>

namespace opcache::server {

OpenFileBudget::OpenFileBudget(std::size_t limit) : m_count(std::make_shared<Count>()) { m_count->limit = limit; }

std::shared_ptr<const base::FileDescriptor> OpenFileBudget::keep(base::FileDescriptor file) {
  if (m_count->kept.fetch_add(1, std::memory_order_relaxed) >= m_count->limit) {
    m_count->kept.fetch_sub(1, std::memory_order_relaxed);
    return nullptr;
  }
  // The deleter holds the count, so a file outliving this budget still
  // gives its share back to something alive.
  auto count = m_count;
  return std::shared_ptr<const base::FileDescriptor>(new base::FileDescriptor(std::move(file)),
                                                     [count](const base::FileDescriptor* kept) {
                                                       delete kept;
                                                       count->kept.fetch_sub(1, std::memory_order_relaxed);
                                                     });
}

std::size_t OpenFileBudget::kept() const noexcept { return m_count->kept.load(std::memory_order_relaxed); }

std::size_t default_open_file_budget() {
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
    return 1024;
  }
  return static_cast<std::size_t>(limit.rlim_cur / 4);
}

}  // namespace opcache::server
