// A fixture of tests/architecture/test_check_thread_safety.py (not compiled
// into the suite): a bare std::mutex and std::lock_guard in product code, which
// the analysis cannot see; scripts/check_thread_safety.py must report each
// with this file and line.
#include <mutex>

namespace fixture {

class Counter {
 public:
  void add() {
    std::lock_guard lock(m_mutex);
    ++m_count;
  }

 private:
  std::mutex m_mutex;
  int m_count = 0;
};

}  // namespace fixture
