// Tests of the child-process harness the end-to-end tests rely on: the
// guard ends whole process groups, still_running does not reap, and the
// lock-waiter poll sees a process waiting for a held flock.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/support/children.hpp"
#include "tests/support/temp_dir.hpp"

namespace fs = std::filesystem;
using namespace opcache::test;

namespace {

// In a forked child: tries to flock `path` without blocking every 20 ms, as
// single flight's waiters do, until it gets it; exits 0 then.
int poll_for_lock(const fs::path& path) {
  for (;;) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0) {
      return 0;
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// True when `pid` is gone or a zombie (killed, not yet reaped by whoever
// inherited it).
bool ended(pid_t pid) {
  const std::string stat = read_text("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return ::kill(pid, 0) != 0 || close == std::string::npos || stat.compare(close, 3, ") Z") == 0;
}

}  // namespace

TEST_CASE("support::wait_for_lock_waiters sees a process polling for a held flock") {
  TempDir dir;
  const fs::path lock = dir / "k.lock";
  CHECK_FALSE(lock_is_held(lock));  // absent
  write_text(lock, "");
  CHECK_FALSE(lock_is_held(lock));  // nobody holds it

  int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);
  CHECK(lock_is_held(lock));

  ChildGuard guard;
  pid_t waiter = fork_child(guard, [&] {
    ::close(fd);  // the inherited copy would hold the parent's lock
    return poll_for_lock(lock);
  });
  wait_for_lock_waiters(lock, {waiter}, std::chrono::seconds(20));
  CHECK(still_running(waiter));
  CHECK(still_running(waiter));  // asking again does not reap it

  ::close(fd);  // releases the lock: the waiter takes it and exits 0
  CHECK(guard.wait(waiter) == 0);
}

TEST_CASE("support::poll_until returns when the condition holds and gives up at the timeout") {
  int calls = 0;
  CHECK(poll_until([&] { return ++calls == 3; }, std::chrono::seconds(20)));
  CHECK(calls == 3);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(poll_until([] { return false; }, std::chrono::milliseconds(30)));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(30));
}

TEST_CASE("support::ChildGuard kills the process group of a child that leads one") {
  TempDir dir;
  const fs::path grandchild_pid = dir / "grandchild.pid";
  pid_t grandchild = 0;
  {
    ChildGuard guard;
    SpawnOptions options;
    options.group = ProcessGroup::own;
    spawn_background(guard, {"sh", "-c", "sleep 60 & echo $! > \"$0\"; wait", grandchild_pid.string()}, options);
    wait_until([&] { return read_text(grandchild_pid).find('\n') != std::string::npos; }, std::chrono::seconds(20),
               "the background sleep's pid in " + grandchild_pid.string());
    grandchild = std::stoi(read_text(grandchild_pid));
    REQUIRE(::kill(grandchild, 0) == 0);
  }
  // The sleep was in the child's group: it got SIGKILL too.
  wait_until([&] { return ended(grandchild); }, std::chrono::seconds(20),
             "the grandchild " + std::to_string(grandchild) + " to end with its group");
}
