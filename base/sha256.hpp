// SHA-256, streaming, with OpenSSL's SHA-256 implementation called directly
// (not through EVP: see sha256.cpp for why).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "opcache/result.hpp"


namespace opcache::base {

using Sha256Digest = std::array<std::uint8_t, 32>;

/// Incremental SHA-256. Not copyable; one instance per stream; not thread-safe.
class Sha256 {
 public:
  Sha256();
  Sha256(Sha256&&) noexcept;
  Sha256& operator=(Sha256&&) noexcept;
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;
  ~Sha256();

  void update(const void* data, std::size_t size);
  void update(std::string_view data) { update(data.data(), data.size()); }
  /// Finishes the hash; the object must not be updated afterwards.
  Sha256Digest finish();
  /// Convenience: `hex(finish())`.
  std::string finish_hex();

 private:
  struct State;
  std::unique_ptr<State> m_state;
};

/// Lowercase hexadecimal of `bytes`.
std::string to_hex(const std::uint8_t* bytes, std::size_t size);
inline std::string to_hex(const Sha256Digest& digest) { return to_hex(digest.data(), digest.size()); }

/// SHA-256 of a whole buffer, lowercase hex.
std::string sha256_hex(std::string_view data);

/// SHA-256, lowercase hex, of what `fd` reads from its current offset to the
/// end of the file (streamed, 64 KiB at a time); `path_for_errors` names it
/// in an `io` error. Leaves the offset at the end.
Result<std::string> sha256_hex_of_file(int fd, const std::filesystem::path& path_for_errors);

/// True when `text` is exactly 64 lowercase hexadecimal characters.
bool is_sha256_hex(std::string_view text) noexcept;

}  // namespace opcache::base
