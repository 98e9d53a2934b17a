// The trust policy: which public keys are trusted (the trusted-keys file),
// where a valid signature by one of them is required (off, remote, all), and
// the judgement of one entry's signatures. docs/security.md.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"
#include "store/signature.hpp"

namespace opcache::store {

/// Where a valid signature by a trusted key is required.
enum class SignatureRequirement {
  off,     ///< nowhere
  remote,  ///< on every entry arriving from a remote (layered lookup, pull) or uploaded to a server
  all,     ///< also on every local read
};

/// "off", "remote", "all".
const char* to_string(SignatureRequirement requirement) noexcept;
/// The inverse of to_string; std::nullopt for anything else.
std::optional<SignatureRequirement> parse_signature_requirement(std::string_view text);

/// Whether `name` may name a key in a trusted-keys file: 1-128 of
/// A-Z a-z 0-9 . _ @ + -.
bool valid_signer_name(std::string_view name) noexcept;

/// One line of a trusted-keys file.
struct TrustedKey {
  std::string name;        ///< [A-Za-z0-9._@+-]+, unique within the file
  std::string public_key;  ///< raw 32 bytes
};

/// The keys of a trusted-keys file: one `NAME:BASE64` a line (BASE64 the
/// standard base64 of the raw 32-byte Ed25519 public key, exactly what
/// `opcache trust keygen` prints), `#` comments and blank lines ignored,
/// blanks around a line trimmed. Immutable; safe to share between threads.
class TrustedKeys {
 public:
  TrustedKeys() = default;

  /// Parses the text of a trusted-keys file; `origin` (its path) names it in
  /// errors. Errors (`usage`) name the origin, the line number and what is
  /// wrong: a malformed line, a bad name, a key that is not 32 bytes of
  /// base64, a name or key given twice.
  static Result<TrustedKeys> parse(std::string_view text, const std::string& origin);

  /// Reads and parses the file. `not_found` when it does not exist.
  static Result<TrustedKeys> load(const std::filesystem::path& path);

  /// The trusted key with this raw public key, or nullptr.
  const TrustedKey* find(std::string_view public_key) const noexcept;

  const std::vector<TrustedKey>& keys() const noexcept { return m_keys; }
  bool empty() const noexcept { return m_keys.empty(); }

 private:
  std::vector<TrustedKey> m_keys;
};

/// Why an entry's signatures were not enough.
enum class RefusalReason {
  unsigned_entry,    ///< no signature at all
  untrusted_signer,  ///< signed, but by no trusted key
  bad_signature,     ///< a trusted key's signature that does not verify for this key and digest
};

/// A refused entry: the reason and, for an untrusted signer, who signed.
struct Refusal {
  RefusalReason reason;
  std::string signer;  ///< base64 public key of the (first) untrusted or failing signer; "" when unsigned

  /// "unsigned", "untrusted signer <first 12 base64 characters>…", "bad signature".
  std::string describe() const;
  /// The server's JSON error code: signature_required, untrusted_signature, bad_signature.
  const char* error_code() const noexcept;
};

/// Judges the signatures of the entry (`key`, `digest`): accepted
/// (std::nullopt) when at least one signature by a trusted key verifies;
/// otherwise bad_signature when a trusted key's signature fails to verify,
/// untrusted_signer when there are only other keys' signatures, and
/// unsigned_entry when there are none.
std::optional<Refusal> judge_signatures(const TrustedKeys& trusted, std::string_view key, std::string_view digest,
                                        const Signatures& signatures);

/// The policy of one store or server.
struct TrustPolicy {
  TrustedKeys trusted;
  SignatureRequirement requirement = SignatureRequirement::off;

  /// Whether entries arriving from remotes must be signed by a trusted key.
  bool checks_remote_entries() const noexcept { return requirement != SignatureRequirement::off; }
  /// Whether entries read from the local store must be signed by a trusted key.
  bool checks_local_entries() const noexcept { return requirement == SignatureRequirement::all; }
};

/// The requirement when none is configured: `remote` once a trusted-keys
/// file is configured (even an empty one: then nothing from a remote is
/// trusted), else `off`.
SignatureRequirement default_requirement(bool trusted_keys_configured) noexcept;

}  // namespace opcache::store
