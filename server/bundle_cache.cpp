#include "server/bundle_cache.hpp"

namespace opcache::server {

BundleCache::BundleCache(std::size_t capacity_bytes, std::size_t max_bundle_bytes)
    : m_capacity(capacity_bytes), m_max_bundle(max_bundle_bytes) {}

bool BundleCache::admits(std::size_t size) const noexcept {
  return size <= m_max_bundle && size + k_entry_overhead <= m_capacity;
}

std::shared_ptr<const CachedBundle> BundleCache::find(const std::string& key) {
  base::MutexLock lock(m_mutex);
  auto it = m_slots.find(key);
  if (it == m_slots.end()) {
    return nullptr;
  }
  m_order.splice(m_order.begin(), m_order, it->second.position);
  return it->second.bundle;
}

void BundleCache::insert(const std::string& key, std::shared_ptr<const CachedBundle> bundle) {
  base::MutexLock lock(m_mutex);
  if (auto old = m_slots.find(key); old != m_slots.end()) {
    drop(old);
  }
  if (!bundle || !admits(bundle->bytes.size())) {
    return;
  }
  m_charged += charge(*bundle);
  m_order.push_front(key);
  m_slots.emplace(key, Slot{std::move(bundle), m_order.begin()});
  while (m_charged > m_capacity) {
    drop(m_slots.find(m_order.back()));
  }
}

void BundleCache::erase(const std::string& key) {
  base::MutexLock lock(m_mutex);
  if (auto it = m_slots.find(key); it != m_slots.end()) {
    drop(it);
  }
}

std::size_t BundleCache::charged_bytes() const {
  base::MutexLock lock(m_mutex);
  return m_charged;
}

std::size_t BundleCache::size() const {
  base::MutexLock lock(m_mutex);
  return m_slots.size();
}

void BundleCache::drop(std::unordered_map<std::string, Slot>::iterator it) {
  m_charged -= charge(*it->second.bundle);
  m_order.erase(it->second.position);
  m_slots.erase(it);
}

}  // namespace opcache::server
