// GET/HEAD /v1/entries/{key}?wait=SECONDS (docs/protocol.md "Waiting for an
// entry"): holds the request, without a thread, until the entry is there,
// the build lease that was live when the wait began ends without it, the
// wait is over, or the server stops. Internal to server/ (http_session.cpp).
#pragma once

#include <functional>
#include <memory>

#include "server/request_dispatch.hpp"
#include "server/server_state.hpp"

namespace opcache::server {

/// Runs `call` (a GET or HEAD of an entry with call.wait > 0) until it
/// answers something other than 404, then calls `done` on `executor` with
/// that answer. It is re-run when an upload stores the key or a lease on it
/// is released (Api::events), and at least once a second (an entry stored by
/// another replica or process, a lease that expired). It ends with the 404
/// when the wait is over or when the lease live at the start has ended
/// without the entry (the waiter should ask for the lease now), and with 503
/// when the server stops. `done` is called exactly once.
void wait_for_entry(const std::shared_ptr<HttpServer::State>& state, net::any_io_executor executor, ApiCall call,
                    const std::string& key, std::function<void(ApiResponse)> done);

}  // namespace opcache::server
