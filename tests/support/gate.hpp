// Ordering threads by an event instead of by sleeping: a gate that threads
// wait at until another thread opens it. A wait has a bound, but only to turn
// a hang (a test or product bug) into a failure: give it a minute, not the
// time the work should take.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace opcache::test {

/// Closed until open(); then open for good. Thread-safe.
class Gate {
 public:
  void open();
  bool is_open() const;
  /// Waits until the gate is open or `timeout` passes; whether it is open.
  bool wait(std::chrono::milliseconds timeout) const;

 private:
  mutable std::mutex m_mutex;
  mutable std::condition_variable m_opened;
  bool m_open = false;
};

}  // namespace opcache::test
