// A small misbehaving HTTP server for fault tests of the remote clients: a
// thread with a listening socket on 127.0.0.1:0 that reads each request and
// then does whatever the test's script says — answer, answer with a body cut
// short, hang, or drop the connection. Every connection serves one request
// and is closed afterwards (responses say "Connection: close"), so the number
// of connections is the number of requests.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace opcache::test {

/// One request as the fault server read it.
struct FaultRequest {
  std::string method;
  std::string target;                          ///< e.g. "/v1/entries/<key>"
  std::map<std::string, std::string> headers;  ///< names lowercased
  std::string body;                            ///< read when Content-Length says so

  /// The header's value, or "" when absent.
  std::string header(const std::string& lowercase_name) const;
};

/// What to do with one request.
struct FaultReply {
  enum class Kind {
    respond,  ///< send `raw` and close
    hang,     ///< send nothing; keep the connection open until the client gives up or the server stops
    drop,     ///< close the connection without a byte
  };
  Kind kind = Kind::respond;
  std::string raw;  ///< the bytes to send (respond)

  /// A complete response: status line, Content-Length, Connection: close.
  static FaultReply status(int code, const std::string& body = {}, const std::string& extra_headers = {});
  /// 200 with `body`.
  static FaultReply ok(const std::string& body) { return status(200, body); }
  /// 200 announcing `body.size()` bytes but sending only the first `sent`.
  static FaultReply cut_short(const std::string& body, std::size_t sent);
  static FaultReply hang() { return {Kind::hang, {}}; }
  static FaultReply drop() { return {Kind::drop, {}}; }
};

/// The script: called (from connection threads, one at a time) for every request.
using FaultScript = std::function<FaultReply(const FaultRequest&)>;

/// The server. Starts listening in the constructor; stops (releasing hanging
/// connections) in the destructor. Thread-safe accessors.
class FaultServer {
 public:
  explicit FaultServer(FaultScript script);
  ~FaultServer();
  FaultServer(const FaultServer&) = delete;
  FaultServer& operator=(const FaultServer&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string url() const;
  int port() const noexcept { return m_port; }
  /// Connections accepted so far.
  int connections() const noexcept { return m_connections.load(); }
  /// Requests read so far, in arrival order.
  std::vector<FaultRequest> requests() const;
  /// How many requests had this method.
  int count(const std::string& method) const;

 private:
  void accept_loop();
  void serve(int fd);
  bool wait_readable(int fd, int timeout_ms) const;

  FaultScript m_script;
  int m_listener = -1;
  int m_port = 0;
  std::atomic<bool> m_stop{false};
  std::atomic<int> m_connections{0};
  mutable std::mutex m_mutex;  // m_requests, m_workers
  std::mutex m_script_mutex;   // one script call at a time
  std::vector<FaultRequest> m_requests;
  std::vector<std::thread> m_workers;
  std::thread m_acceptor;
};

/// Passes `request` on to the real server at `base_url` (its Authorization,
/// Content-Type and X-Opcache-Signature headers, and its body) and returns
/// the answer as a reply: status, body and Content-Type. With it a script is
/// a proxy that misbehaves only where the test says.
FaultReply forward_to(const FaultRequest& request, const std::string& base_url);

/// A TCP port on 127.0.0.1 that nothing listens on (bound, read back, closed):
/// connecting to it is refused.
int refused_port();

}  // namespace opcache::test
