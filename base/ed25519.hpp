// Ed25519 keys and signatures through OpenSSL's EVP interface: generating a
// key pair, private keys in PKCS#8 PEM files (created 0600, refused when
// group or others may access them, as ssh does), signing, and verifying
// against a raw 32-byte public key.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "opcache/result.hpp"

struct evp_pkey_st;

namespace opcache::base {

inline constexpr std::size_t k_ed25519_public_key_bytes = 32;
inline constexpr std::size_t k_ed25519_signature_bytes = 64;

/// An Ed25519 private key (with its public half). Immutable after creation;
/// copies share the key; safe to use from several threads at once.
class Ed25519PrivateKey {
 public:
  /// A new random key pair (`internal` error when OpenSSL fails).
  static Result<Ed25519PrivateKey> generate();

  /// Reads a PKCS#8 PEM private key. Refused (`usage`): a file that group or
  /// others may access (the message says how to fix the mode), a file that
  /// is not an Ed25519 private key, a symlink. `not_found` when absent.
  static Result<Ed25519PrivateKey> load_pem_file(const std::filesystem::path& path);

  /// Writes the key as PKCS#8 PEM to a new file with mode 0600 (synced).
  /// Never overwrites: an existing path (file or symlink) is a `usage` error.
  Status save_pem_file(const std::filesystem::path& path) const;

  /// The raw 32-byte public key.
  const std::string& public_key() const noexcept { return m_public_key; }

  /// The 64-byte Ed25519 signature of `message`.
  Result<std::string> sign(std::string_view message) const;

 private:
  explicit Ed25519PrivateKey(std::shared_ptr<evp_pkey_st> key);

  std::shared_ptr<evp_pkey_st> m_key;
  std::string m_public_key;
};

/// True when `signature` (64 bytes) is a valid Ed25519 signature of
/// `message` by `public_key` (32 raw bytes); false for anything else,
/// including wrong sizes. Thread-safe.
bool ed25519_verify(std::string_view public_key, std::string_view message, std::string_view signature);

}  // namespace opcache::base
