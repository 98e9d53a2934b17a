// SHA-256 over OpenSSL's EVP interface, streaming.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <openssl/evp.h>

namespace opcache::base {

using Sha256Digest = std::array<std::uint8_t, 32>;

/// Incremental SHA-256. Not copyable; one instance per stream; not thread-safe.
class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Finishes the hash; the object must not be updated afterwards.
  Sha256Digest finish();
  /// Convenience: `hex(finish())`.
  std::string finish_hex();

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> m_ctx;
};

/// Lowercase hexadecimal of `bytes`.
std::string to_hex(const std::uint8_t* bytes, std::size_t size);
inline std::string to_hex(const Sha256Digest& digest) { return to_hex(digest.data(), digest.size()); }

/// SHA-256 of a whole buffer, lowercase hex.
std::string sha256_hex(std::string_view data);

/// True when `text` is exactly 64 lowercase hexadecimal characters.
bool is_sha256_hex(std::string_view text) noexcept;

}  // namespace opcache::base
