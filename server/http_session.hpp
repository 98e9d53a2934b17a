// One HTTP connection of `opcache serve` (plain TCP or TLS): reads a
// request, routes and authorizes it from its header, reads its body, runs the
// handler on the worker pool, writes the response, repeats while keep-alive.
#pragma once

#include <memory>

#include "server/server_state.hpp"

namespace opcache::server {

/// Starts serving an accepted connection: sets TCP_NODELAY, registers the
/// session with `state` (which tracks it for graceful shutdown) and begins
/// reading (after the TLS handshake when config.tls()). The session owns
/// itself through its pending operations. Call on the socket's strand.
void start_session(const std::shared_ptr<HttpServer::State>& state, tcp::socket socket);

}  // namespace opcache::server
