#include "server/bundle_file_body.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace opcache::server {

boost::optional<std::pair<BundleFileBody::writer::const_buffers_type, bool>> BundleFileBody::writer::get(
    boost::beast::error_code& ec) {
  ec = {};
  if (m_sent >= m_body.size) {
    return boost::none;
  }
  if (!m_buffer) {
    m_buffer = std::make_unique<char[]>(k_bundle_write_bytes);
  }
  const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(k_bundle_write_bytes, m_body.size - m_sent));
  ssize_t got = 0;
  do {
    got = ::pread(m_body.fd.get(), m_buffer.get(), wanted, static_cast<off_t>(m_sent));
  } while (got < 0 && errno == EINTR);
  if (got < 0) {
    ec = boost::beast::error_code(errno, boost::system::generic_category());
    return boost::none;
  }
  if (got == 0) {
    ec = boost::beast::error_code(EIO, boost::system::generic_category());  // the file is shorter than its entry
    return boost::none;
  }
  m_sent += static_cast<std::uint64_t>(got);
  return std::make_pair(const_buffers_type(m_buffer.get(), static_cast<std::size_t>(got)), m_sent < m_body.size);
}

}  // namespace opcache::server
