// Running real programs from tests: the CLI, the C compiler, helpers. The one
// way tests start a child program: run_process (wait and capture its output)
// or spawn_process (start it in the background with its output in files; see
// tests/support/children.hpp for the guard that reaps it).
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace opcache::test {

struct ProcessResult {
  int exit_code = -1;  ///< exit status, or 128 + signal number
  std::string out;     ///< standard output
  std::string err;     ///< standard error
};

struct ProcessOptions {
  std::map<std::string, std::string> env;  ///< added to (or replacing in) the environment
  std::vector<std::string> unset_env;      ///< removed from the environment
  std::string stdin_data;
  std::string cwd;
};

/// Runs argv[0] (searched in PATH) with arguments, waits, captures output.
/// Throws std::runtime_error when it cannot be started. Thread-safe.
ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options = {});

/// Runs the built `opcache` CLI (OPCACHE_CLI_PATH) with `args`.
ProcessResult run_cli(const std::vector<std::string>& args, const ProcessOptions& options = {});

/// Path of the built CLI.
std::string cli_path();

/// Whether a spawned child leads a new process group (kill(-pid) then reaches
/// everything it starts) or stays in the test's group.
enum class ProcessGroup { inherit, own };

/// How spawn_process starts a background child. Standard input is /dev/null.
struct SpawnOptions {
  std::filesystem::path out;  ///< standard output, appended to (created); empty: /dev/null
  std::filesystem::path err;  ///< standard error, appended to; empty: /dev/null; equal to `out`: shares it
  ProcessGroup group = ProcessGroup::inherit;
  bool default_signals = false;        ///< reset SIGPIPE/SIGTERM/SIGINT/SIGHUP and unblock every signal
  std::vector<std::string> unset_env;  ///< removed from the environment
};

/// Starts argv[0] (searched in PATH) in the background and returns its pid
/// without waiting; the caller owns the child and must reap it (ChildGuard).
/// Throws std::runtime_error naming the program when it cannot be started.
pid_t spawn_process(const std::vector<std::string>& argv, const SpawnOptions& options = {});

/// Exit status of a waitpid() status word: the exit code, or 128 + signal.
int decode_wait_status(int status);

/// Waits for child `pid` to exit (retrying on EINTR) and returns its decoded
/// status, or -1 when it is not a child of this process.
int wait_exit(pid_t pid);

/// The settings from the environment that change what opcache does; tests
/// and the servers they start run without them.
const std::vector<std::string>& hermetic_variables();

/// Removes hermetic_variables() from this process's environment so the
/// developer's settings cannot change what a test sees. Not thread-safe (call
/// at the start of a test case, before starting threads).
void hermetic_environment();

}  // namespace opcache::test
