#include "base/byte_stream.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::base {

Result<std::size_t> FdSource::read(void* buffer, std::size_t size) { return read_some(m_fd, buffer, size, m_path); }

Status FdSink::write(const void* data, std::size_t size) { return write_all(m_fd, data, size, m_path); }

Result<std::size_t> MemorySource::read(void* buffer, std::size_t size) {
  std::size_t n = std::min(size, m_data.size());
  std::memcpy(buffer, m_data.data(), n);
  m_data.remove_prefix(n);
  return n;
}

std::optional<std::string_view> MemorySource::take_rest() {
  return std::exchange(m_data, std::string_view());
}

Status StringSink::write(const void* data, std::size_t size) {
  m_data.append(static_cast<const char*>(data), size);
  return {};
}

Status HashingSink::write(const void* data, std::size_t size) {
  OPCACHE_TRY(m_inner.write(data, size));
  m_hash.update(data, size);
  m_bytes += size;
  return {};
}

Result<std::size_t> HashingSource::read(void* buffer, std::size_t size) {
  OPCACHE_TRY_ASSIGN(std::size_t n, m_inner.read(buffer, size));
  m_hash.update(buffer, n);
  m_bytes += n;
  return n;
}

std::optional<std::string_view> HashingSource::take_rest() {
  auto rest = m_inner.take_rest();
  if (rest) {
    m_hash.update(rest->data(), rest->size());
    m_bytes += rest->size();
  }
  return rest;
}

}  // namespace opcache::base
