// A fixture of tests/architecture/test_check_thread_safety.py (not compiled
// into the suite): a GUARDED_BY member written without its mutex, which
// scripts/check_thread_safety.py must report with this file and line.
#include "base/mutex.hpp"

namespace fixture {

class Counter {
 public:
  void add() EXCLUDES(m_mutex) {
    ++m_count;  // the lock is missing: reported here
  }

  int count() EXCLUDES(m_mutex) {
    opcache::base::MutexLock lock(m_mutex);
    return m_count;
  }

 private:
  opcache::base::Mutex m_mutex;
  int m_count GUARDED_BY(m_mutex) = 0;
};

}  // namespace fixture
