#include "tests/support/process.hpp"
#include "opcache_test_paths.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "opcache/opcache.hpp"
#include "server/server_config.hpp"

extern char** environ;

namespace opcache::test {

namespace {

// This process's environment without `unset` and the names in `set`, then `set`.
std::vector<std::string> build_environment(const std::map<std::string, std::string>& set,
                                           const std::vector<std::string>& unset) {
  std::vector<std::string> env;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    std::string item(*entry);
    std::string name = item.substr(0, item.find('='));
    bool dropped = set.count(name) != 0;
    for (const auto& unset_name : unset) {
      dropped = dropped || unset_name == name;
    }
    if (!dropped) {
      env.push_back(item);
    }
  }
  for (const auto& [name, value] : set) {
    env.push_back(name + "=" + value);
  }
  return env;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) {
    out.push_back(s.data());
  }
  out.push_back(nullptr);
  return out;
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 || ::pipe2(in_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe failed");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  if (!options.cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());
  }
  std::vector<std::string> args = argv;
  std::vector<std::string> env = build_environment(options.env, options.unset_env);
  auto arg_ptrs = pointers(args);
  auto env_ptrs = pointers(env);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0].c_str(), &actions, nullptr, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  ::close(in_pipe[0]);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(in_pipe[1]);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("cannot run " + args[0] + ": " + std::strerror(rc));
  }
  // Feed stdin and drain both outputs without deadlocking on full pipes.
  ::signal(SIGPIPE, SIG_IGN);
  ProcessResult result;
  std::size_t written = 0;
  int in_fd = in_pipe[1];
  if (options.stdin_data.empty()) {
    ::close(in_fd);
    in_fd = -1;
  }
  int fds[2] = {out_pipe[0], err_pipe[0]};
  std::string* sinks[2] = {&result.out, &result.err};
  while (fds[0] >= 0 || fds[1] >= 0) {
    pollfd polls[3];
    int count = 0;
    for (int i = 0; i < 2; ++i) {
      polls[count++] = {fds[i], POLLIN, 0};
    }
    polls[count++] = {in_fd, POLLOUT, 0};
    if (::poll(polls, count, -1) < 0 && errno != EINTR) {
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i] >= 0 && (polls[i].revents & (POLLIN | POLLHUP | POLLERR))) {
        char buffer[65536];
        ssize_t n = ::read(fds[i], buffer, sizeof buffer);
        if (n > 0) {
          sinks[i]->append(buffer, static_cast<std::size_t>(n));
        } else if (n == 0 || errno != EINTR) {
          ::close(fds[i]);
          fds[i] = -1;
        }
      }
    }
    if (in_fd >= 0 && (polls[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::write(in_fd, options.stdin_data.data() + written, options.stdin_data.size() - written);
      if (n > 0) {
        written += static_cast<std::size_t>(n);
      }
      if (n < 0 || written == options.stdin_data.size()) {
        ::close(in_fd);
        in_fd = -1;
      }
    }
  }
  if (in_fd >= 0) {
    ::close(in_fd);
  }
  result.exit_code = wait_exit(pid);
  return result;
}

std::string cli_path() { return OPCACHE_CLI_PATH; }

ProcessResult run_cli(const std::vector<std::string>& args, const ProcessOptions& options) {
  std::vector<std::string> argv{cli_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, options);
}

namespace {

void redirect(posix_spawn_file_actions_t& actions, int fd, const std::filesystem::path& path) {
  if (path.empty()) {
    posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", O_WRONLY, 0);
  } else {
    posix_spawn_file_actions_addopen(&actions, fd, path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  }
}

void set_attributes(posix_spawnattr_t& attributes, const SpawnOptions& options) {
  short flags = 0;
  if (options.group == ProcessGroup::own) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attributes, 0);
  }
  if (options.default_signals) {
    sigset_t defaults;
    sigemptyset(&defaults);
    for (int signal_number : {SIGPIPE, SIGTERM, SIGINT, SIGHUP}) {
      sigaddset(&defaults, signal_number);
    }
    sigset_t empty;
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attributes, &defaults);
    posix_spawnattr_setsigmask(&attributes, &empty);
    flags |= POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  }
  posix_spawnattr_setflags(&attributes, flags);
}

}  // namespace

pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& options) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  redirect(actions, 1, options.out);
  if (!options.err.empty() && options.err == options.out) {
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
  } else {
    redirect(actions, 2, options.err);
  }
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  set_attributes(attributes, options);
  std::vector<std::string> args = argv;
  std::vector<std::string> env = build_environment({}, options.unset_env);
  auto arg_ptrs = pointers(args);
  auto env_ptrs = pointers(env);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0].c_str(), &actions, &attributes, arg_ptrs.data(), env_ptrs.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (rc != 0) {
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  return pid;
}

int decode_wait_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return -1;
    }
  }
  return decode_wait_status(status);
}

const std::vector<std::string>& hermetic_variables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> list = {
        "OPCACHE_DIR",          "OPCACHE_CONFIG",          "OPCACHE_MIN_IDLE",     "OPCACHE_MODE",
        "OPCACHE_OP_DEBUG_LEVEL", "OPCACHE_OP_DEBUG_LIST", "OPCACHE_VOLATILE_FIELDS", "OPCACHE_WAIT_TIMEOUT",
        "RANK_SIZE",            "LOCAL_WORLD_SIZE",        "XDG_CACHE_HOME",
        // What toolchain=auto reads (store/scenario_detect): a test sets its own install.
        "ASCEND_TOOLKIT_HOME",  "ASCEND_HOME_PATH",        "ASCEND_CACHE_PATH",    "TUNE_BANK_PATH",
        "ASCEND_OPP_PATH",      "ASCEND_CUSTOM_OPP_PATH"};
    // Every variable of the client's settings table (OPCACHE_COMPILER_CHECK,
    // OPCACHE_EXEC_ENV…) and of `opcache serve`'s (OPCACHE_SERVE_*).
    for (const auto& setting : setting_descriptors()) {
      if (!setting.env.empty() && setting.env.starts_with("OPCACHE_")) {
        list.emplace_back(setting.env);
      }
    }
    for (const auto& row : server::serve_settings()) {
      list.emplace_back(row.env);
    }
    return list;
  }();
  return names;
}

void hermetic_environment() {
  for (const auto& name : hermetic_variables()) {
    ::unsetenv(name.c_str());
  }
}

}  // namespace opcache::test
