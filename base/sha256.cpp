#include "base/sha256.hpp"

#include <stdexcept>

namespace opcache::base {

Sha256::Sha256() : m_ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free) {
  // Allocation failure or a FIPS-disabled digest is unrecoverable here.
  if (!m_ctx || EVP_DigestInit_ex(m_ctx.get(), EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
  }
}

void Sha256::update(const void* data, std::size_t size) {
  if (size > 0) {
    EVP_DigestUpdate(m_ctx.get(), data, size);
  }
}

Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  unsigned int length = 0;
  EVP_DigestFinal_ex(m_ctx.get(), digest.data(), &length);
  return digest;
}

std::string Sha256::finish_hex() { return to_hex(finish()); }

std::string to_hex(const std::uint8_t* bytes, std::size_t size) {
  static constexpr char k_digits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (std::size_t i = 0; i < size; ++i) {
    out[2 * i] = k_digits[bytes[i] >> 4];
    out[2 * i + 1] = k_digits[bytes[i] & 0x0f];
  }
  return out;
}

std::string sha256_hex(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return hasher.finish_hex();
}

bool is_sha256_hex(std::string_view text) noexcept {
  if (text.size() != 64) {
    return false;
  }
  for (char c : text) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace opcache::base
