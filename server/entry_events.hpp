// Wake-ups for requests waiting on an entry (GET /v1/entries/{key}?wait=S):
// whoever changes what a waiter waits for — an upload storing the key, a
// lease on it ending, the server stopping — calls notify(), and each waiter
// subscribed to that key is called once. Nothing here knows HTTP or Asio.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "base/mutex.hpp"

namespace opcache::server {

/// Subscriptions by key. Thread-safe; callbacks run on the notifying thread,
/// outside the lock, and must only hand work to their owner (post to its
/// executor): they may run after unsubscribe() has returned on another thread.
class EntryEvents {
 public:
  /// Calls `wake` at the next notify(key) or notify_all(), once; returns an id for unsubscribe().
  std::uint64_t subscribe(const std::string& key, std::function<void()> wake);
  /// Drops a subscription that has not been called yet; no-op otherwise.
  void unsubscribe(std::uint64_t id);
  /// Calls (and drops) every subscription to `key`.
  void notify(const std::string& key);
  /// Calls (and drops) every subscription (the server is stopping).
  void notify_all();
  /// How many subscriptions wait now.
  std::size_t waiting() const;

 private:
  struct Waiter {
    std::string key;
    std::function<void()> wake;
  };
  mutable base::Mutex m_mutex;
  std::uint64_t m_next_id GUARDED_BY(m_mutex) = 1;
  std::map<std::uint64_t, Waiter> m_waiters GUARDED_BY(m_mutex);
};

}  // namespace opcache::server
