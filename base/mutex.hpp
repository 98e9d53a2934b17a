// A mutex, its scoped lock and a condition variable that clang's thread-safety
// analysis understands (base/thread_annotations.hpp). libstdc++'s std::mutex
// carries no annotations, so code that annotates its shared state locks
// through these instead (as Abseil's absl::Mutex and LevelDB's port::Mutex).
// They add nothing at run time: each is the std:: type it wraps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "base/thread_annotations.hpp"

namespace opcache::base {

class CondVar;

/// A non-recursive exclusive lock (std::mutex). Not copyable or movable.
/// Prefer MutexLock to calling lock()/unlock().
class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  /// Blocks until this thread holds the mutex. Locking it twice on one thread is undefined.
  void lock() ACQUIRE() { m_mutex.lock(); }
  /// Releases the mutex, which this thread holds.
  void unlock() RELEASE() { m_mutex.unlock(); }

 private:
  friend class CondVar;
  std::mutex m_mutex;
};

/// Holds a Mutex from construction to destruction (std::lock_guard).
class SCOPED_CAPABILITY MutexLock {
 public:
  /// Locks `mutex`, which must outlive this object.
  explicit MutexLock(Mutex& mutex) ACQUIRE(mutex) : m_mutex(mutex) { m_mutex.lock(); }
  /// Unlocks the mutex.
  ~MutexLock() RELEASE() { m_mutex.unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex& m_mutex;
};

/// A condition variable (std::condition_variable) used with a base::Mutex.
/// Every wait releases the mutex while blocked and holds it again when it
/// returns; wake-ups may be spurious, so callers wait in a loop on their
/// condition, which they read under the mutex where the analysis sees it:
///   MutexLock lock(m_mutex);
///   while (!m_ready) { m_changed.wait(m_mutex); }
/// (No predicate overloads: the analysis cannot tell that a lambda runs
/// under the mutex, so a predicate reading GUARDED_BY members would not compile.)
class CondVar {
 public:
  CondVar() = default;
  CondVar(const CondVar&) = delete;
  CondVar& operator=(const CondVar&) = delete;

  /// Blocks until notified (or spuriously woken). The caller holds `mutex`
  /// (through a MutexLock) and holds it again on return.
  void wait(Mutex& mutex) REQUIRES(mutex) {
    std::unique_lock<std::mutex> adopted(mutex.m_mutex, std::adopt_lock);
    m_cv.wait(adopted);
    adopted.release();  // the caller's MutexLock unlocks it
  }

  /// As wait(), up to `deadline` on the steady clock. Returns false when the
  /// deadline has passed, true when woken earlier (notified or spuriously).
  bool wait_until(Mutex& mutex, std::chrono::steady_clock::time_point deadline) REQUIRES(mutex) {
    std::unique_lock<std::mutex> adopted(mutex.m_mutex, std::adopt_lock);
    const auto status = m_cv.wait_until(adopted, deadline);
    adopted.release();
    return status == std::cv_status::no_timeout;
  }

  /// Wakes one waiting thread, if any. Needs no lock.
  void notify_one() noexcept { m_cv.notify_one(); }
  /// Wakes every waiting thread. Needs no lock.
  void notify_all() noexcept { m_cv.notify_all(); }

 private:
  std::condition_variable m_cv;
};

}  // namespace opcache::base
