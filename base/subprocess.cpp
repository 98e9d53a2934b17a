#include "base/subprocess.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

extern char** environ;

namespace opcache::base {

namespace {

// Owns the two ends of a pipe.
class Pipe {
 public:
  Pipe() {
    if (::pipe2(m_fds, O_CLOEXEC) != 0) {
      m_fds[0] = m_fds[1] = -1;
    }
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  ~Pipe() {
    close_read();
    close_write();
  }
  bool ok() const { return m_fds[0] >= 0; }
  int read_end() const { return m_fds[0]; }
  int write_end() const { return m_fds[1]; }
  void close_read() { close_fd(m_fds[0]); }
  void close_write() { close_fd(m_fds[1]); }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) {
      ::close(fd);
      fd = -1;
    }
  }
  int m_fds[2];
};

// Owns posix_spawn file actions.
class SpawnActions {
 public:
  SpawnActions() { posix_spawn_file_actions_init(&m_actions); }
  SpawnActions(const SpawnActions&) = delete;
  SpawnActions& operator=(const SpawnActions&) = delete;
  ~SpawnActions() { posix_spawn_file_actions_destroy(&m_actions); }
  posix_spawn_file_actions_t* get() { return &m_actions; }

 private:
  posix_spawn_file_actions_t m_actions;
};

// Reads both pipes until both are closed, so neither can fill up and block the child.
void drain(Pipe& out_pipe, Pipe& err_pipe, ProcessOutput& output) {
  pollfd fds[2] = {{out_pipe.read_end(), POLLIN, 0}, {err_pipe.read_end(), POLLIN, 0}};
  std::string* sinks[2] = {&output.out, &output.err};
  int open_count = 2;
  char buffer[8192];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) {
        continue;
      }
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) {
        continue;
      }
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        const auto room = k_max_captured - std::min(k_max_captured, sinks[i]->size());
        sinks[i]->append(buffer, std::min(room, static_cast<std::size_t>(n)));
      } else if (n == 0 || errno != EINTR) {
        fds[i].fd = -1;
        --open_count;
      }
    }
  }
}

}  // namespace

Result<ProcessOutput> run_program(const std::vector<std::string>& argv, const std::filesystem::path& cwd) {
  Pipe out_pipe, err_pipe;
  if (!out_pipe.ok() || !err_pipe.ok()) {
    return Error::io(std::string("cannot create a pipe to run ") + argv[0] + ": " + std::strerror(errno));
  }
  SpawnActions actions;
  posix_spawn_file_actions_addopen(actions.get(), 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(actions.get(), out_pipe.write_end(), 1);
  posix_spawn_file_actions_adddup2(actions.get(), err_pipe.write_end(), 2);
  if (!cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(actions.get(), cwd.c_str());
  }
  std::vector<char*> args;
  for (const auto& arg : argv) {
    args.push_back(const_cast<char*>(arg.c_str()));
  }
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  out_pipe.close_write();
  err_pipe.close_write();
  if (rc != 0) {
    return Error::build_failed("cannot run \"" + argv[0] + "\": " + std::strerror(rc));
  }
  ProcessOutput output;
  drain(out_pipe, err_pipe, output);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return Error::io("cannot wait for " + argv[0] + ": " + std::strerror(errno));
    }
  }
  output.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return output;
}

}  // namespace opcache::base
