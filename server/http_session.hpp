// One HTTP connection of `opcache serve` (plain TCP or TLS): reads a
// request, routes and authorizes it from its header, reads its body, runs the
// handler on the worker pool, writes the response, repeats while keep-alive.
#pragma once

#include <memory>

#include "server/server_state.hpp"

namespace opcache::server {

/// An accepted connection's socket, bound to the concrete executor of the I/O
/// context that serves it rather than Asio's type-erased any_io_executor:
/// every read, write and timer of a request copies its stream's executor,
/// and the type-erased one cost about 4 % of a small GET's CPU at 512
/// connections (perf, issue 39).
using ConnectionSocket = tcp::socket::rebind_executor<net::io_context::executor_type>::other;

/// Starts serving an accepted connection: sets TCP_NODELAY, registers the
/// session with `state` (which tracks it for graceful shutdown) and begins
/// reading (after the TLS handshake when config.tls()). The session owns
/// itself through its pending operations. Call on the socket's strand.
void start_session(const std::shared_ptr<HttpServer::State>& state, ConnectionSocket socket);

}  // namespace opcache::server
