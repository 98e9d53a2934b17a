// Turns an ApiResponse into the message that sends it: a bundle in memory
// (from the bundle cache, or a small bundle file read whole) as a rendered
// header and its bytes, a large one streamed from its file, headers only for
// HEAD, or a string body. Used by
// the sessions (server/http_session.cpp), which write the message and log it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include <boost/asio/buffer.hpp>

#include <boost/beast/http.hpp>

#include "server/api.hpp"
#include "server/bundle_file_body.hpp"

namespace opcache::server {

namespace http = boost::beast::http;

/// A bundle's 200 response with its header already rendered as bytes: the
/// session writes `head` and the body in one gather write, without Beast's
/// field map and serializer (which cost a GET more instructions than the rest
/// of its handling; see docs/architecture.md).
struct RenderedBundleResponse {
  std::string head;                         ///< status line and header fields, ending in the blank line
  std::shared_ptr<const std::string> body;  ///< the bundle's bytes (shared with the bundle cache, or owned)
  /// The bundle's stored file when the storage kept one open
  /// (StoredBundle::memory_file), else null; a plain-HTTP session sends it
  /// with sendfile(2) instead of `body`.
  std::shared_ptr<const base::FileDescriptor> file;

  /// The two pieces to write, in order.
  std::array<boost::asio::const_buffer, 2> buffers() const {
    return {boost::asio::buffer(head), boost::asio::buffer(*body)};
  }
};

/// One response ready to write. Each alternative owns all it sends.
struct OutgoingResponse {
  std::variant<std::shared_ptr<http::response<http::string_body>>, std::shared_ptr<http::response<http::empty_body>>,
               std::shared_ptr<http::response<BundleFileBody>>, std::shared_ptr<RenderedBundleResponse>>
      message;
  int status = 200;
  std::uint64_t bytes_out = 0;  ///< body bytes, for the access log and the metrics (0 for HEAD)
};

/// The message of `response` for a request whose method was HEAD when
/// `head` (or response.head_only): headers including Content-Length, no
/// body. `close`: the connection closes after it (Connection: close).
/// Bundles up to 1 MiB are sent in one write, from memory. A bundle's
/// RenderedBundleResponse is `spare` (its head rendered into the string's
/// room, its body and file replaced) when `spare` is its only owner, so a
/// session that hands back its last one allocates none per response; else a
/// new one.
OutgoingResponse to_message(ApiResponse response, bool head, bool close,
                            std::shared_ptr<RenderedBundleResponse> spare = nullptr);

}  // namespace opcache::server
