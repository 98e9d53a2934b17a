#include "store/signature.hpp"

#include <algorithm>

#include "base/base64.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

constexpr std::size_t k_quoted_characters = 100;

std::string quoted(std::string_view text) {
  if (text.size() > k_quoted_characters) {
    return "\"" + std::string(text.substr(0, k_quoted_characters)) + "…\"";
  }
  return "\"" + std::string(text) + "\"";
}

}  // namespace

std::string signed_message(std::string_view key, std::string_view digest) {
  std::string message = "opcache-sig-v1\n";
  message.append(key);
  message += '\n';
  message.append(digest);
  return message;
}

Result<Signature> sign_entry(const base::Ed25519PrivateKey& signing_key, std::string_view key,
                             std::string_view digest) {
  OPCACHE_TRY_ASSIGN(std::string signature, signing_key.sign(signed_message(key, digest)));
  return Signature{signing_key.public_key(), std::move(signature)};
}

bool signature_verifies(const Signature& signature, std::string_view key, std::string_view digest) {
  return base::ed25519_verify(signature.public_key, signed_message(key, digest), signature.signature);
}

std::string format_signature(const Signature& signature) {
  return base::base64_encode(signature.public_key) + ":" + base::base64_encode(signature.signature);
}

Result<Signature> parse_signature(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return Error::usage("signature " + quoted(text) + " is not <public key base64>:<signature base64>");
  }
  auto public_key = base::base64_decode(text.substr(0, colon));
  auto signature = base::base64_decode(text.substr(colon + 1));
  if (!public_key || public_key->size() != base::k_ed25519_public_key_bytes) {
    return Error::usage("signature " + quoted(text) + ": the public key is not the base64 of 32 bytes");
  }
  if (!signature || signature->size() != base::k_ed25519_signature_bytes) {
    return Error::usage("signature " + quoted(text) + ": the signature is not the base64 of 64 bytes");
  }
  return Signature{std::move(*public_key), std::move(*signature)};
}

std::string format_signatures(const Signatures& signatures) {
  std::string text;
  for (const auto& signature : signatures) {
    text += (text.empty() ? "" : "\n") + format_signature(signature);
  }
  return text;
}

Result<Signatures> parse_signatures(std::string_view text) {
  Signatures signatures;
  while (!text.empty()) {
    const auto end = text.find('\n');
    const auto line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) {
      continue;
    }
    OPCACHE_TRY_ASSIGN(Signature signature, parse_signature(line));
    add_signature(signatures, std::move(signature));
  }
  return signatures;
}

bool add_signature(Signatures& signatures, Signature signature) {
  const bool present = std::any_of(signatures.begin(), signatures.end(), [&](const Signature& existing) {
    return existing.public_key == signature.public_key;
  });
  if (present) {
    return false;
  }
  signatures.push_back(std::move(signature));
  return true;
}

int merge_signatures(Signatures& signatures, const Signatures& added) {
  int count = 0;
  for (const auto& signature : added) {
    count += add_signature(signatures, signature) ? 1 : 0;
  }
  return count;
}

Result<int> merge_verified_signatures(Signatures& signatures, const Signatures& added, std::string_view key,
                                      std::string_view digest) {
  for (const auto& signature : added) {
    if (!signature_verifies(signature, key, digest)) {
      return Error::untrusted("the signature by " + base::base64_encode(signature.public_key) +
                              " does not verify for entry " + std::string(key) + " (bundle digest " +
                              std::string(digest) + ")");
    }
  }
  return merge_signatures(signatures, added);
}

}  // namespace opcache::store
