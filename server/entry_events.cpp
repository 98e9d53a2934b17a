#include "server/entry_events.hpp"

#include <vector>

namespace opcache::server {

std::uint64_t EntryEvents::subscribe(const std::string& key, std::function<void()> wake) {
  base::MutexLock lock(m_mutex);
  const auto id = m_next_id++;
  m_waiters.emplace(id, Waiter{key, std::move(wake)});
  return id;
}

void EntryEvents::unsubscribe(std::uint64_t id) {
  base::MutexLock lock(m_mutex);
  m_waiters.erase(id);
}

void EntryEvents::notify(const std::string& key) {
  std::vector<std::function<void()>> woken;
  {
    base::MutexLock lock(m_mutex);
    for (auto it = m_waiters.begin(); it != m_waiters.end();) {
      if (it->second.key != key) {
        ++it;
        continue;
      }
      woken.push_back(std::move(it->second.wake));
      it = m_waiters.erase(it);
    }
  }
  for (auto& wake : woken) {
    wake();
  }
}

void EntryEvents::notify_all() {
  std::map<std::uint64_t, Waiter> woken;
  {
    base::MutexLock lock(m_mutex);
    woken.swap(m_waiters);
  }
  for (auto& [id, waiter] : woken) {
    waiter.wake();
  }
}

std::size_t EntryEvents::waiting() const {
  base::MutexLock lock(m_mutex);
  return m_waiters.size();
}

}  // namespace opcache::server
