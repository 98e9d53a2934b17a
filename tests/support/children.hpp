// Child processes of end-to-end tests: forked bodies and background programs
// that a guard kills and reaps when the test ends (even when a REQUIRE fails),
// and pollers that wait for a real condition instead of sleeping.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/process.hpp"

namespace opcache::test {

/// Owns the children a test starts. On destruction kills (with SIGKILL, and
/// their whole process group when they lead one) and reaps every child still
/// registered. Not thread-safe; one per test case.
class ChildGuard {
 public:
  ChildGuard() = default;
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard();

  /// Registers `pid` and returns it.
  pid_t add(pid_t pid);

  /// Waits for `pid` to exit, unregisters it and returns its decoded status
  /// (exit code, or 128 + signal; -1 when it is not a child).
  int wait(pid_t pid);

  /// Kills `pid` (its group too when it leads one) with SIGKILL, reaps it
  /// and returns its decoded status.
  int kill(pid_t pid);

 private:
  std::vector<pid_t> m_pids;
};

/// Forks a child that runs `body` and _exit()s with its result (97 when it
/// throws); the child is registered with `guard`. Call only before the parent
/// creates opcache objects (a fork must not copy their locks and handles),
/// and only while it runs no other thread: REQUIREs that (a lock another
/// thread holds, the allocator's, would never be released in the child).
pid_t fork_child(ChildGuard& guard, const std::function<int()>& body);

/// spawn_process() registered with `guard`; fails the test (REQUIRE) with the
/// program's name when it cannot be started.
pid_t spawn_background(ChildGuard& guard, const std::vector<std::string>& argv, const SpawnOptions& options = {});

/// True while child `pid` has not exited; does not reap it either way.
bool still_running(pid_t pid);

/// Polls `condition` every few milliseconds until it holds or `timeout`
/// passes; returns whether it held. Never fails the test by itself.
bool poll_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

/// Polls `condition` until it holds; when `timeout` passes first, fails the
/// test (REQUIRE) with "timed out after N ms waiting for <what>".
void wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout, const std::string& what);

/// Waits (polling) up to `timeout` for `path` to exist; returns whether it
/// does. Safe in forked children (it does not touch doctest).
bool wait_for_file(const std::filesystem::path& path, std::chrono::milliseconds timeout);

/// Whether some process holds an flock() on `lock_file` now (a line of
/// /proc/locks for its device and inode). False when it does not exist.
bool lock_is_held(const std::filesystem::path& lock_file);

/// Whether `signal`, sent to process `pid` with kill(), still waits to be
/// taken by one of its threads (/proc/<pid>/status, ShdPnd): false once a
/// thread has taken it to run its handler, or when there is no such process.
/// Wait for it to turn false to know a signal was handled, not just sent.
bool signal_pending(pid_t pid, int signal);

/// Whether child `pid` is asleep in nanosleep/clock_nanosleep now (its
/// /proc/<pid>/syscall), as a single-flight waiter is between its
/// non-blocking attempts to take a lock held by another process.
bool asleep_in_nanosleep(pid_t pid);

/// Waits until `lock_file` is held and every process in `waiters` is asleep
/// between attempts to take it: they all tried, found it held and are
/// waiting. Fails the test (REQUIRE) naming the lock after `timeout`.
void wait_for_lock_waiters(const std::filesystem::path& lock_file, const std::vector<pid_t>& waiters,
                           std::chrono::milliseconds timeout = std::chrono::seconds(20));

}  // namespace opcache::test
