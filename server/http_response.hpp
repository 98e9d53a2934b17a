// Turns an ApiResponse into the Beast message that sends it: a bundle from
// memory without a copy, a small bundle file read into one write, a large one
// streamed from its file, headers only for HEAD, or a string body. Used by
// the sessions (server/http_session.cpp), which write the message and log it.
#pragma once

#include <cstdint>
#include <memory>
#include <variant>

#include <boost/beast/http.hpp>

#include "server/api.hpp"
#include "server/bundle_file_body.hpp"

namespace opcache::server {

namespace http = boost::beast::http;

/// A bundle held in memory, and the message whose body points into it.
struct MemoryBundleMessage {
  std::shared_ptr<const std::string> bytes;
  http::response<http::span_body<const char>> message;
};

/// One response ready to write. Each alternative owns all it sends.
struct OutgoingResponse {
  std::variant<std::shared_ptr<http::response<http::string_body>>, std::shared_ptr<http::response<http::empty_body>>,
               std::shared_ptr<http::response<BundleFileBody>>, std::shared_ptr<MemoryBundleMessage>>
      message;
  int status = 200;
  std::uint64_t bytes_out = 0;  ///< body bytes, for the access log and the metrics (0 for HEAD)
};

/// The message of `response` for a request whose method was HEAD when
/// `head` (or response.head_only): headers including Content-Length, no
/// body. `close`: the connection closes after it (Connection: close).
/// Bundles up to 1 MiB are sent in one write, from memory.
OutgoingResponse to_message(ApiResponse response, bool head, bool close);

}  // namespace opcache::server
