#include "store/digest_prefetch.hpp"

#include <system_error>
#include <utility>

namespace opcache::store {

DigestPrefetch::DigestPrefetch(base::DigestCache cache, bool programs_digested)
    : m_cache(std::move(cache)), m_programs_digested(programs_digested) {}

DigestPrefetch::~DigestPrefetch() { finish(); }

void DigestPrefetch::offer(const trace::PathEvent& event) {
  if (event.access == trace::Access::written) {
    m_written.insert(event.path);  // the tree's own file: read later, it is no input
    return;
  }
  const bool input = event.access == trace::Access::read ||
                     (event.access == trace::Access::executed && m_programs_digested);
  if (!input || !event.identity || m_written.contains(event.path)) {
    return;
  }
  {
    const std::lock_guard lock(m_mutex);
    if (m_finishing) {
      return;
    }
    m_queue.push_back(event.path);
  }
  if (!m_worker.joinable()) {
    try {
      m_worker = std::thread([this] { work(); });
    } catch (const std::system_error&) {
      const std::lock_guard lock(m_mutex);
      m_queue.clear();  // no thread: observe_build digests them all afterwards
      m_finishing = true;
    }
  }
  m_wake.notify_one();
}

void DigestPrefetch::finish() {
  {
    const std::lock_guard lock(m_mutex);
    m_finishing = true;
  }
  m_wake.notify_one();
  if (m_worker.joinable()) {
    m_worker.join();
  }
}

void DigestPrefetch::work() {
  std::unique_lock lock(m_mutex);
  while (true) {
    m_wake.wait(lock, [this] { return m_finishing || !m_queue.empty(); });
    if (m_queue.empty()) {
      return;  // finishing, and nothing left
    }
    const std::string path = std::move(m_queue.front());
    m_queue.pop_front();
    lock.unlock();
    (void)m_cache.file_sha256(path);
    lock.lock();
  }
}

}  // namespace opcache::store
