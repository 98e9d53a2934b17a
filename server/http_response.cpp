#include "server/http_response.hpp"

#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include <boost/beast/core.hpp>

#include "opcache/version.hpp"

namespace opcache::server {

namespace {

namespace beast = boost::beast;

const std::string k_server_header = std::string("opcache/") + k_version_string;

// Bundles up to this size are read into memory and sent in one write;
// larger ones stream from the file.
constexpr std::int64_t k_in_memory_bundle_bytes = 1 << 20;

template <class Body>
void finish_headers(http::response<Body>& message, const ApiResponse& response, bool close) {
  message.set(http::field::server, k_server_header);
  if (!response.content_type.empty()) {
    message.set(http::field::content_type, response.content_type);
  }
  for (const auto& [name, value] : response.headers) {
    message.insert(name, value);  // a name may repeat (one X-Opcache-Signature per signature)
  }
  message.keep_alive(!close);
}

// The whole bundle, when it is small enough and reads completely.
std::optional<std::string> read_small_bundle(const StoredBundle& bundle) {
  if (bundle.size < 0 || bundle.size > k_in_memory_bundle_bytes) {
    return std::nullopt;
  }
  std::string bytes(static_cast<std::size_t>(bundle.size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::pread(bundle.fd.get(), bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return std::nullopt;  // fall back to streaming, which reports the error
    }
    done += static_cast<std::size_t>(got);
  }
  return bytes;
}

OutgoingResponse bundle_file_message(ApiResponse response, bool close) {
  auto message = std::make_shared<http::response<BundleFileBody>>(static_cast<http::status>(response.status), 11);
  finish_headers(*message, response, close);
  message->body().fd = std::move(response.bundle->fd);
  message->body().size = static_cast<std::uint64_t>(response.bundle->size);
  message->prepare_payload();
  return {message, response.status, static_cast<std::uint64_t>(response.bundle->size)};
}

// The status line and header fields of a bundle's 200 response: what
// finish_headers and prepare_payload make Beast write, rendered directly.
// Into `head`, replacing what it held (and keeping its capacity).
void render_bundle_head(std::string& head, const ApiResponse& response, std::size_t body_bytes, bool close) {
  head.clear();
  head.reserve(192 + 160 * response.headers.size());
  head += "HTTP/1.1 200 OK\r\nServer: ";
  head += k_server_header;
  if (!response.content_type.empty()) {
    head += "\r\nContent-Type: ";
    head += response.content_type;
  }
  for (const auto& [name, value] : response.headers) {
    head += "\r\n";
    head += name;
    head += ": ";
    head += value;
  }
  head += "\r\nContent-Length: ";
  head += std::to_string(body_bytes);
  head += close ? "\r\nConnection: close\r\n\r\n" : "\r\n\r\n";
}

// A bundle in memory as the body, without copying it: the response shares
// the bytes, and `file` (the stored file holding them, or null), until they
// are written. In `spare` when nothing else holds it.
OutgoingResponse bundle_memory_message(const ApiResponse& response, std::shared_ptr<const std::string> bytes,
                                       bool close, std::shared_ptr<RenderedBundleResponse> spare,
                                       std::shared_ptr<const base::FileDescriptor> file = nullptr) {
  auto rendered = spare && spare.use_count() == 1 ? std::move(spare) : std::make_shared<RenderedBundleResponse>();
  render_bundle_head(rendered->head, response, bytes->size(), close);
  rendered->body = std::move(bytes);
  rendered->file = std::move(file);
  return {rendered, 200, static_cast<std::uint64_t>(rendered->body->size())};
}

// The headers a GET would get (Content-Length included), without the body.
OutgoingResponse header_only_message(const ApiResponse& response, bool close) {
  auto message = std::make_shared<http::response<http::empty_body>>(static_cast<http::status>(response.status), 11);
  finish_headers(*message, response, close);
  if (response.status != 304) {
    message->content_length(response.bundle ? static_cast<std::uint64_t>(response.bundle->size) : response.body.size());
  }
  return {message, response.status, 0};
}

OutgoingResponse string_message(ApiResponse response, bool close) {
  auto message = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), 11);
  finish_headers(*message, response, close);
  message->body() = std::move(response.body);
  if (response.status != 304) {
    message->prepare_payload();
  }
  const auto bytes = message->body().size();
  return {message, response.status, bytes};
}

}  // namespace

OutgoingResponse to_message(ApiResponse response, bool head, bool close,
                            std::shared_ptr<RenderedBundleResponse> spare) {
  head = head || response.head_only;
  const bool sends_bundle = response.bundle && !head && response.status == 200;
  if (sends_bundle && response.bundle->memory) {
    return bundle_memory_message(response, std::move(response.bundle->memory), close, std::move(spare),
                                 std::move(response.bundle->memory_file));
  }
  if (sends_bundle) {
    auto bytes = read_small_bundle(*response.bundle);
    if (!bytes) {
      return bundle_file_message(std::move(response), close);
    }
    // One write instead of the file's pieces.
    return bundle_memory_message(response, std::make_shared<const std::string>(std::move(*bytes)), close,
                                 std::move(spare));
  }
  return head ? header_only_message(response, close) : string_message(std::move(response), close);
}

}  // namespace opcache::server
