// A real `opcache serve` on loopback for end-to-end tests, an HTTP(S) client
// on libcurl, and a raw TCP client for misbehaving peers (truncated bodies,
// stalled uploads, slowloris headers, garbage).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace opcache::test {

/// `opcache serve --listen 127.0.0.1:0 --port-file F --storage DIR <extra>`,
/// started with posix_spawn in its own process group, standard error (and so
/// the access log, unless `extra` redirects it) in a log file. The process
/// group is killed (SIGKILL) on destruction if still running. Not thread-safe;
/// the server itself serves concurrent clients.
class ServerProcess {
 public:
  /// Starts the server and waits (up to `ready_timeout`) for its port file.
  /// Throws std::runtime_error, with the log, when it does not come up.
  /// `global_args` go before `serve` (`--config FILE`).
  ServerProcess(const std::filesystem::path& storage, const std::vector<std::string>& extra_args,
                std::chrono::milliseconds ready_timeout = std::chrono::seconds(10),
                const std::vector<std::string>& global_args = {});
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  /// "http://127.0.0.1:<port>" or "https://…" when started with --tls-cert.
  std::string base_url() const;
  int port() const noexcept { return m_port; }
  pid_t pid() const noexcept { return m_pid; }
  /// Everything the server wrote to standard error so far.
  std::string log_text() const;
  const std::filesystem::path& log_path() const noexcept { return m_log_path; }
  /// Sends `signal` to the server process (not its group).
  void signal(int signal) const;
  /// Whether the process has exited (reaps it; see exit_code()).
  bool exited();
  /// SIGTERM, then waits up to `timeout` (SIGKILL after); returns the exit
  /// code (128 + signal when killed). Idempotent.
  int stop(std::chrono::milliseconds timeout = std::chrono::seconds(15));
  /// Waits up to `timeout` for the process to exit by itself; the exit code,
  /// or nullopt if it is still running.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);

 private:
  std::filesystem::path m_dir;  // port file and log live here
  std::filesystem::path m_log_path;
  bool m_tls = false;
  pid_t m_pid = -1;
  int m_port = 0;
  std::optional<int> m_exit_code;
};

/// Options of one HTTP request.
struct HttpOptions {
  std::string ca_file;                      ///< TLS: trust only this PEM certificate
  std::optional<std::filesystem::path> body_file;  ///< upload this file instead of the body string
  long timeout_ms = 15000;
  bool cert_info = false;                   ///< fill HttpResponse::peer_certificate (TLS)
};

struct HttpResponse {
  long status = 0;  ///< 0 when no response arrived (see error)
  std::map<std::string, std::string> headers;  ///< names lowercased; the last value of a repeated header
  std::vector<std::pair<std::string, std::string>> header_lines;  ///< every header in order, names lowercased
  std::string body;
  std::string error;       ///< libcurl's message when the transfer failed
  long new_connections = 0;  ///< connections opened for this request (0: a kept-alive one was reused)
  std::string peer_certificate;  ///< PEM ("Cert" of CURLINFO_CERTINFO) when cert_info was set

  /// The header's value, or "" when absent.
  std::string header(const std::string& lowercase_name) const;
  /// Every value of the header, in the order received (repeated headers).
  std::vector<std::string> header_values(const std::string& lowercase_name) const;
  /// The "error" code of a JSON error body, else the whole body (for messages).
  std::string error_code() const;
};

/// An easy handle kept between requests, so connections are kept alive and
/// reused (check HttpResponse::new_connections). One request at a time.
class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  /// Sends `method url` with `headers` ("Name: value") and `body` (sent when
  /// non-empty or when the method is PUT/POST; or options.body_file).
  HttpResponse request(const std::string& method, const std::string& url, const std::vector<std::string>& headers = {},
                       const std::string& body = {}, const HttpOptions& options = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> m_impl;
};

/// One request on a fresh connection.
HttpResponse http_request(const std::string& method, const std::string& url,
                          const std::vector<std::string>& headers = {}, const std::string& body = {},
                          const HttpOptions& options = {});

/// A plain TCP connection to 127.0.0.1:port for clients that misbehave on
/// purpose. Sends never raise SIGPIPE. Closed on destruction.
class RawConnection {
 public:
  /// Connects; throws std::runtime_error when the connection is refused.
  /// `receive_buffer_bytes` > 0 sets SO_RCVBUF first (a peer that must wait
  /// for a slow reader).
  explicit RawConnection(int port, int receive_buffer_bytes = 0);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  /// Whether a connection to 127.0.0.1:port is accepted right now.
  static bool can_connect(int port);

  /// Sends all bytes; false when the peer has gone (EPIPE, ECONNRESET).
  bool send(const std::string& bytes);
  /// Reads what arrives until `timeout` passes, the peer closes, or (when
  /// `until` is non-empty) the text received contains `until`.
  std::string receive(std::chrono::milliseconds timeout, const std::string& until = {});
  /// Reads one whole HTTP response (header, then Content-Length bytes).
  std::string receive_response(std::chrono::milliseconds timeout);
  /// Waits up to `timeout` for the peer to close (EOF or reset); returns
  /// whether it did. Data that arrives meanwhile is appended to received().
  bool wait_closed(std::chrono::milliseconds timeout);
  /// Half-closes our sending side (the server sees end of stream).
  void shutdown_send();
  /// Closes the connection now.
  void close();
  /// Whether the peer has closed the connection (seen by a read).
  bool peer_closed() const noexcept { return m_peer_closed; }
  /// Everything received so far.
  const std::string& received() const noexcept { return m_received; }

 private:
  // Waits up to `timeout` for bytes and appends one read's worth to
  // m_received; returns how many (0 on timeout or when the peer closed).
  std::size_t read_some(std::chrono::milliseconds timeout);

  int m_fd = -1;
  bool m_peer_closed = false;
  std::string m_received;
};

/// The status code of the first HTTP response in `raw` ("HTTP/1.1 201 …"), 0 if none.
int raw_status(const std::string& raw);

}  // namespace opcache::test
