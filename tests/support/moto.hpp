// A real moto_server (the AWS mock) on loopback, for tests of the S3 client.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace opcache::test {

/// An access key pair (and session token) that moto accepts once
/// authentication is enabled.
struct MotoKeys {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  ///< empty for an IAM user's long-term keys
};

/// Sets the AWS_* environment to test credentials that moto (before
/// enable_authentication) accepts, for the client and for the servers the
/// test starts (they inherit the environment); unsets a session token and
/// profile from the caller's environment.
void use_moto_test_credentials();

/// Runs `moto_server` (found in PATH) on 127.0.0.1 at a port chosen at run
/// time, in its own process group, with its output in a log file. The server
/// dies with this object (SIGTERM, then SIGKILL to the group) and, through
/// PR_SET_PDEATHSIG, with the test process if that crashes.
///
/// Moto accepts any credentials and does not check signatures until
/// enable_authentication() is called. Not thread-safe itself; the server it
/// runs serves concurrent requests.
class MotoServer {
 public:
  /// Starts the server and waits (up to ~20 s) until it answers HTTP. Never
  /// throws: check start_error().
  MotoServer();
  ~MotoServer();
  MotoServer(const MotoServer&) = delete;
  MotoServer& operator=(const MotoServer&) = delete;

  /// Why the server is not running (not installed, did not start in time,
  /// exited early — with the tail of its log); nullopt when it runs.
  const std::optional<std::string>& start_error() const noexcept { return m_start_error; }

  /// "http://127.0.0.1:<port>"; meaningful only when start_error() is nullopt.
  const std::string& endpoint() const noexcept { return m_endpoint; }

  /// The server shared by all tests of this process, started on first use
  /// (each TEST_CASE runs in its own process under CTest, so in practice one
  /// per test case). Check unavailable_reason() before using it.
  static MotoServer& shared();

  /// Why shared() cannot be used (moto_server not in PATH, failed to start);
  /// nullopt when it runs. Starts the shared server on first call.
  static std::optional<std::string> unavailable_reason();

  /// Credentials for an IAM user and for an assumed role (with a session
  /// token), both allowed everything.
  struct AuthenticationKeys {
    MotoKeys user;
    MotoKeys session;
  };

  /// Creates the IAM user, role and session above, then switches this server
  /// to checking every later request: SigV4 signature, key, token, policy.
  /// Irreversible: use a dedicated server, not shared(). Throws
  /// std::runtime_error when moto does not cooperate.
  AuthenticationKeys enable_authentication();

 private:
  bool start(const std::string& program);
  bool wait_until_ready();
  std::string log_tail() const;
  void stop() noexcept;

  std::optional<std::string> m_start_error;
  std::string m_endpoint;
  std::string m_log_path;
  pid_t m_pid = -1;
};

}  // namespace opcache::test
