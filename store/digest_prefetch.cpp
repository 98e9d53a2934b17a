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
    base::MutexLock lock(m_mutex);
    if (m_finishing) {
      return;
    }
    m_queue.push_back(event.path);
  }
  if (!m_worker.joinable()) {
    try {
      m_worker = std::thread([this] { work(); });
    } catch (const std::system_error&) {
      base::MutexLock lock(m_mutex);
      m_queue.clear();  // no thread: observe_build digests them all afterwards
      m_finishing = true;
    }
  }
  m_wake.notify_one();
}

void DigestPrefetch::finish() {
  {
    base::MutexLock lock(m_mutex);
    m_finishing = true;
  }
  m_wake.notify_one();
  if (m_worker.joinable()) {
    m_worker.join();
  }
}

std::optional<std::string> DigestPrefetch::next() {
  base::MutexLock lock(m_mutex);
  while (!m_finishing && m_queue.empty()) {
    m_wake.wait(m_mutex);
  }
  if (m_queue.empty()) {
    return std::nullopt;  // finishing, and nothing left
  }
  std::string path = std::move(m_queue.front());
  m_queue.pop_front();
  return path;
}

void DigestPrefetch::work() {
  while (auto path = next()) {
    (void)m_cache.file_sha256(*path);
  }
}

}  // namespace opcache::store
