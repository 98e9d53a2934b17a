// OpenSSL 3 deprecates the direct digest functions in favour of EVP, but the
// first EVP call of a process initialises OpenSSL's default library context:
// it fetches the digest through the provider machinery and reads the
// system's openssl.cnf — about a fifth of the instructions of a whole
// `opcache get` hit (callgrind). The direct functions do the same hashing
// with no initialisation, and leave the default context (used for TLS and
// signatures) to be initialised, with the system's configuration, by the code
// that needs it.
#define OPENSSL_SUPPRESS_DEPRECATED

#include "base/sha256.hpp"

#include <openssl/sha.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <memory>

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::base {

struct Sha256::State {
  SHA256_CTX context;
};

Sha256::Sha256() : m_state(std::make_unique<State>()) {
  if (SHA256_Init(&m_state->context) != 1) {
    throw std::runtime_error("OpenSSL: cannot initialise SHA-256");
  }
}

Sha256::Sha256(Sha256&&) noexcept = default;
Sha256& Sha256::operator=(Sha256&&) noexcept = default;
Sha256::~Sha256() = default;

void Sha256::update(const void* data, std::size_t size) {
  if (size > 0) {
    SHA256_Update(&m_state->context, data, size);
  }
}

Sha256Digest Sha256::finish() {
  Sha256Digest digest{};
  SHA256_Final(digest.data(), &m_state->context);
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

Result<std::string> sha256_hex_of_file(int fd, const std::filesystem::path& path_for_errors) {
  Sha256 hasher;
  // Not zeroed: zeroing 64 KiB to hash an 8 KiB source cost an exec hit 14
  // page faults; read(2) touches only the pages it fills.
  constexpr std::size_t k_chunk = 64 * 1024;
  const auto buffer = std::make_unique_for_overwrite<char[]>(k_chunk);
  for (;;) {
    OPCACHE_TRY_ASSIGN(std::size_t size, read_some(fd, buffer.get(), k_chunk, path_for_errors));
    if (size == 0) {
      return hasher.finish_hex();
    }
    hasher.update(buffer.get(), size);
  }
}

std::string sha256_hex(std::string_view data) {
  Sha256 hasher;
  hasher.update(data);
  return hasher.finish_hex();
}

bool is_sha256_hex(std::string_view text) noexcept {
  // Arithmetic, a constant trip count and no early exit: the compiler turns
  // it into a few 16-byte vector steps (a table lookup per byte was ~400
  // instructions; the server checks the key of every request).
  if (text.size() != 64) {
    return false;
  }
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  unsigned char bad = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    const unsigned char digit = static_cast<unsigned char>(bytes[i] - '0') < 10;
    const unsigned char letter = static_cast<unsigned char>(bytes[i] - 'a') < 6;
    bad |= static_cast<unsigned char>((digit | letter) ^ 1);
  }
  return bad == 0;
}

}  // namespace opcache::base
