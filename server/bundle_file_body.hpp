// A Beast body that streams a bundle from its open file in pieces of
// k_bundle_write_bytes. Beast's own file_body reads and sends 4 KiB at a
// time: a 2 MiB bundle took 512 writes, and large bundles were served at
// 0.74× nginx's rate (issue 22). Used by server/http_response.cpp for
// bundles too large to send from memory. On plain HTTP the session sends
// such a message's head and then its file by sendfile(2) instead
// (server/http_session.cpp, send_file_rest); Beast writes this body over
// TLS, which encrypts in user space.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/optional.hpp>

#include "base/file_io.hpp"

namespace opcache::server {

/// The size of each read and write of a streamed bundle: 256 KiB, the
/// socket's usual send buffer; one buffer per response being written.
inline constexpr std::size_t k_bundle_write_bytes = 256 * 1024;

/// The body type (Beast's Body concept, writer side only).
struct BundleFileBody {
  /// The open file and how many bytes of it to send, from its start.
  struct value_type {
    base::FileDescriptor fd;
    std::uint64_t size = 0;
  };

  static std::uint64_t size(const value_type& body) { return body.size; }

  /// Reads the file piece by piece with pread; a short file is an error.
  class writer {
   public:
    using const_buffers_type = boost::asio::const_buffer;

    template <bool is_request, class Fields>
    writer(const boost::beast::http::header<is_request, Fields>&, const value_type& body) : m_body(body) {}

    void init(boost::beast::error_code& ec) { ec = {}; }

    /// The next piece, and whether more follow; none at the end.
    boost::optional<std::pair<const_buffers_type, bool>> get(boost::beast::error_code& ec);

   private:
    const value_type& m_body;
    std::unique_ptr<char[]> m_buffer;
    std::uint64_t m_sent = 0;
  };
};

}  // namespace opcache::server
