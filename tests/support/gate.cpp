#include "tests/support/gate.hpp"

namespace opcache::test {

void Gate::open() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_open = true;
  }
  m_opened.notify_all();
}

bool Gate::is_open() const {
  std::lock_guard<std::mutex> lock(m_mutex);
  return m_open;
}

bool Gate::wait(std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(m_mutex);
  return m_opened.wait_for(lock, timeout, [this] { return m_open; });
}

}  // namespace opcache::test
