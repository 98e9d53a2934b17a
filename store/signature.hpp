// Entry signatures (docs/formats.md "Signatures"): the signed message, making
// and checking one signature, and the one text form every carrier uses (the
// index column, X-Opcache-Signature headers, the signature objects of file://
// and s3:// remotes): "<public key base64>:<signature base64>", one per line.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/ed25519.hpp"
#include "opcache/result.hpp"
#include "opcache/types.hpp"

namespace opcache::store {

using opcache::Signature;
using Signatures = std::vector<Signature>;

/// The bytes an entry signature covers: "opcache-sig-v1\n" + key + "\n" +
/// digest, key and digest as lowercase hex (the digest is the SHA-256 of the
/// bundle bytes).
std::string signed_message(std::string_view key, std::string_view digest);

/// `signing_key`'s signature of the entry (`key`, `digest`).
Result<Signature> sign_entry(const base::Ed25519PrivateKey& signing_key, std::string_view key,
                             std::string_view digest);

/// True when `signature` is a valid signature of the entry (`key`, `digest`)
/// by its public key. Says nothing about whether that key is trusted.
bool signature_verifies(const Signature& signature, std::string_view key, std::string_view digest);

/// "<public key base64>:<signature base64>".
std::string format_signature(const Signature& signature);

/// The inverse of format_signature; `usage` error (quoting at most the
/// first 100 characters) when `text` is not exactly that, with a 32-byte key
/// and a 64-byte signature.
Result<Signature> parse_signature(std::string_view text);

/// The signatures one per line (no trailing newline); "" for none.
std::string format_signatures(const Signatures& signatures);

/// The inverse of format_signatures (blank lines and a final newline are
/// allowed); the first malformed line is a `usage` error.
Result<Signatures> parse_signatures(std::string_view text);

/// Appends `signature` unless `signatures` already has one by the same
/// public key; true when it was added.
bool add_signature(Signatures& signatures, Signature signature);

/// add_signature for each of `added`; returns how many were new.
int merge_signatures(Signatures& signatures, const Signatures& added);

/// merge_signatures after checking that each of `added` verifies for the
/// entry (`key`, `digest`); otherwise an `untrusted` error naming the signer,
/// key and digest, and `signatures` is left as it was.
Result<int> merge_verified_signatures(Signatures& signatures, const Signatures& added, std::string_view key,
                                      std::string_view digest);

}  // namespace opcache::store
