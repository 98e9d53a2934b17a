#include "tests/support/children.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <doctest/doctest.h>

#include "tests/support/temp_dir.hpp"

namespace opcache::test {

namespace {

using Clock = std::chrono::steady_clock;

void kill_with_group(pid_t pid) {
  if (::getpgid(pid) == pid) {
    ::kill(-pid, SIGKILL);
  }
  ::kill(pid, SIGKILL);
}

// "MAJOR:MINOR:INODE" as /proc/locks writes it (hex device numbers).
std::string proc_locks_id(const struct stat& info) {
  char id[64];
  std::snprintf(id, sizeof id, "%02x:%02x:%lu", ::major(info.st_dev), ::minor(info.st_dev),
                static_cast<unsigned long>(info.st_ino));
  return id;
}

// How many threads this process runs (its /proc/self/task entries).
std::size_t thread_count() {
  std::size_t count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    ++count;
  }
  return count;
}

}  // namespace

ChildGuard::~ChildGuard() {
  for (pid_t pid : m_pids) {
    kill_with_group(pid);
    int status = 0;
    ::waitpid(pid, &status, 0);
  }
}

pid_t ChildGuard::add(pid_t pid) {
  m_pids.push_back(pid);
  return pid;
}

int ChildGuard::wait(pid_t pid) {
  int code = wait_exit(pid);
  m_pids.erase(std::remove(m_pids.begin(), m_pids.end(), pid), m_pids.end());
  return code;
}

int ChildGuard::kill(pid_t pid) {
  kill_with_group(pid);
  return wait(pid);
}

pid_t fork_child(ChildGuard& guard, const std::function<int()>& body) {
  // The child runs C++ (it allocates): a lock another thread holds at the
  // fork, such as the sanitizer allocator's, would never be released in it.
  REQUIRE_MESSAGE(thread_count() == 1, "fork_child from a process running other threads; use threads instead");
  std::fflush(nullptr);
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int code = 97;
    try {
      code = body();
    } catch (...) {
      code = 97;
    }
    ::_exit(code);
  }
  return guard.add(pid);
}

pid_t spawn_background(ChildGuard& guard, const std::vector<std::string>& argv, const SpawnOptions& options) {
  pid_t pid = -1;
  try {
    pid = spawn_process(argv, options);
  } catch (const std::exception& error) {
    FAIL(error.what());
  }
  return guard.add(pid);
}

bool still_running(pid_t pid) {
  // WNOWAIT: an exited child stays reapable for ChildGuard::wait.
  siginfo_t info{};
  return ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == 0;
}

bool poll_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!condition()) {
    if (Clock::now() >= deadline) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

void wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout, const std::string& what) {
  REQUIRE_MESSAGE(poll_until(condition, timeout), "timed out after ", timeout.count(), " ms waiting for ", what);
}

bool wait_for_file(const std::filesystem::path& path, std::chrono::milliseconds timeout) {
  return poll_until(
      [&] {
        std::error_code ec;
        return std::filesystem::exists(path, ec);
      },
      timeout);
}

bool lock_is_held(const std::filesystem::path& lock_file) {
  struct stat info {};
  if (::stat(lock_file.c_str(), &info) != 0) {
    return false;
  }
  const std::string id = proc_locks_id(info);
  std::istringstream locks(read_text("/proc/locks"));
  for (std::string line; std::getline(locks, line);) {
    std::istringstream fields(line);
    std::vector<std::string> words;
    for (std::string word; fields >> word;) {
      words.push_back(word);
    }
    // "N: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF"; waiters blocked in
    // flock() have "->" after the number and are not holders.
    if (words.size() >= 6 && words[1] != "->" && words[1] == "FLOCK" && words[5] == id) {
      return true;
    }
  }
  return false;
}

bool signal_pending(pid_t pid, int signal) {
  std::istringstream lines(read_text("/proc/" + std::to_string(pid) + "/status"));  // "" when it is gone
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("ShdPnd:", 0) == 0) {
      const unsigned long long mask = std::stoull(line.substr(7), nullptr, 16);
      return ((mask >> (signal - 1)) & 1ULL) != 0;
    }
  }
  return false;
}

bool asleep_in_nanosleep(pid_t pid) {
  std::istringstream syscall(read_text("/proc/" + std::to_string(pid) + "/syscall"));
  long number = -1;
  syscall >> number;
  return number == SYS_clock_nanosleep
#ifdef SYS_nanosleep
         || number == SYS_nanosleep
#endif
      ;
}

void wait_for_lock_waiters(const std::filesystem::path& lock_file, const std::vector<pid_t>& waiters,
                           std::chrono::milliseconds timeout) {
  wait_until(
      [&] {
        return lock_is_held(lock_file) && std::all_of(waiters.begin(), waiters.end(), [](pid_t pid) {
                 return still_running(pid) && asleep_in_nanosleep(pid);
               });
      },
      timeout, std::to_string(waiters.size()) + " processes waiting for the held lock " + lock_file.string());
}

}  // namespace opcache::test
