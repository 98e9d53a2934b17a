// A fixture of tests/architecture/test_check_thread_safety.py (not compiled
// into the suite): unlocked_member.cpp with its lock, and a CondVar waited on
// in a loop; scripts/check_thread_safety.py must pass it. A comment or a
// string that names std::mutex is not a bare lock.
#include <string>

#include "base/mutex.hpp"

namespace fixture {

class Counter {
 public:
  void add() EXCLUDES(m_mutex) {
    opcache::base::MutexLock lock(m_mutex);
    ++m_count;
    m_changed.notify_all();
  }

  void wait_for(int count) EXCLUDES(m_mutex) {
    opcache::base::MutexLock lock(m_mutex);
    while (m_count < count) {
      m_changed.wait(m_mutex);
    }
  }

  std::string describe() const { return "guarded by a base::Mutex, not a std::mutex"; }

 private:
  opcache::base::Mutex m_mutex;
  opcache::base::CondVar m_changed;
  int m_count GUARDED_BY(m_mutex) = 0;
};

}  // namespace fixture
