// The HTTP/1.1 server of `opcache serve` on Boost.Asio/Beast: asynchronous,
// a fixed number of I/O threads (each with its own io_context and its share
// of the connections) for any number of keep-alive connections, reads of a
// local store answered on the I/O thread, other storage work (uploads,
// queries, listings, S3) on a separate worker pool, optional TLS (OpenSSL), timeouts,
// limits, access log, metrics, graceful shutdown. The listeners are
// http_server.cpp, one connection http_session.cpp, the shared state and
// shutdown server_state.cpp; the API itself is api.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "server/auth.hpp"
#include "server/server_config.hpp"
#include "server/storage.hpp"

namespace opcache::server {

/// A running server. Create, start(), then run() on the calling thread.
class HttpServer {
 public:
  HttpServer(ServerConfig config, std::unique_ptr<Storage> storage, TokenTable tokens);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// Loads TLS material, binds every listen address and starts accepting.
  /// Returns the bound addresses ("127.0.0.1:43121"; port 0 is resolved).
  Result<std::vector<std::string>> start();

  /// Serves until stopped: SIGTERM or SIGINT (or request_stop) stops
  /// accepting, lets requests in flight finish (up to shutdown_grace_s) and
  /// closes idle connections; SIGHUP reloads the tokens file and the TLS
  /// certificate. Uses config.threads I/O threads including the caller's.
  void run();

  /// Begins a graceful stop; safe from any thread.
  void request_stop();

  /// Implementation detail (server/server_state.hpp), shared by listeners and sessions.
  struct State;

 private:
  std::shared_ptr<State> m_state;
};

}  // namespace opcache::server
