#include "store/trust.hpp"

#include <algorithm>
#include <cctype>

#include "base/base64.hpp"
#include "base/file_io.hpp"
#include "base/text.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

constexpr std::size_t k_signer_prefix_characters = 12;
constexpr std::size_t k_max_name_characters = 128;

}  // namespace

bool valid_signer_name(std::string_view name) noexcept {
  if (name.empty() || name.size() > k_max_name_characters) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '@' || c == '+' || c == '-';
  });
}

namespace {

// One non-comment line: "NAME:BASE64".
Result<TrustedKey> parse_line(std::string_view line, const std::string& where) {
  const auto colon = line.find(':');
  if (colon == std::string_view::npos) {
    return Error::usage(where + ": expected NAME:BASE64 (a line printed by `opcache trust keygen`)");
  }
  const auto name = base::trim_space(line.substr(0, colon));
  if (!valid_signer_name(name)) {
    return Error::usage(where + ": the name \"" + std::string(name.substr(0, k_max_name_characters)) +
                        "\" must be 1-128 of A-Z a-z 0-9 . _ @ + -");
  }
  auto public_key = base::base64_decode(base::trim_space(line.substr(colon + 1)));
  if (!public_key || public_key->size() != base::k_ed25519_public_key_bytes) {
    return Error::usage(where + ": the key of \"" + std::string(name) +
                        "\" is not the base64 of a 32-byte Ed25519 public key");
  }
  return TrustedKey{std::string(name), std::move(*public_key)};
}

}  // namespace

const char* to_string(SignatureRequirement requirement) noexcept {
  switch (requirement) {
    case SignatureRequirement::off:
      return "off";
    case SignatureRequirement::remote:
      return "remote";
    case SignatureRequirement::all:
      return "all";
  }
  return "off";
}

std::optional<SignatureRequirement> parse_signature_requirement(std::string_view text) {
  for (auto requirement : {SignatureRequirement::off, SignatureRequirement::remote, SignatureRequirement::all}) {
    if (text == to_string(requirement)) {
      return requirement;
    }
  }
  return std::nullopt;
}

Result<TrustedKeys> TrustedKeys::parse(std::string_view text, const std::string& origin) {
  TrustedKeys trusted;
  int line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const auto end = text.find('\n');
    const auto line = base::trim_space(text.substr(0, end));
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty() || line.front() == '#') {
      continue;
    }
    const std::string where = origin + ":" + std::to_string(line_number);
    OPCACHE_TRY_ASSIGN(TrustedKey key, parse_line(line, where));
    for (const auto& known : trusted.m_keys) {
      if (known.name == key.name) {
        return Error::usage(where + ": the name \"" + key.name + "\" is given twice");
      }
      if (known.public_key == key.public_key) {
        return Error::usage(where + ": the key of \"" + key.name + "\" is already trusted as \"" + known.name + "\"");
      }
    }
    trusted.m_keys.push_back(std::move(key));
  }
  return trusted;
}

Result<TrustedKeys> TrustedKeys::load(const std::filesystem::path& path) {
  auto text = base::read_file(path);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return Error::not_found("trusted keys file " + path.string() + " does not exist");
    }
    return text.error();
  }
  return parse(*text, path.string());
}

const TrustedKey* TrustedKeys::find(std::string_view public_key) const noexcept {
  for (const auto& key : m_keys) {
    if (key.public_key == public_key) {
      return &key;
    }
  }
  return nullptr;
}

std::string Refusal::describe() const {
  switch (reason) {
    case RefusalReason::unsigned_entry:
      return "unsigned";
    case RefusalReason::untrusted_signer:
      return "untrusted signer " + signer.substr(0, k_signer_prefix_characters) + "…";
    case RefusalReason::bad_signature:
      return "bad signature";
  }
  return "unsigned";
}

const char* Refusal::error_code() const noexcept {
  switch (reason) {
    case RefusalReason::unsigned_entry:
      return "signature_required";
    case RefusalReason::untrusted_signer:
      return "untrusted_signature";
    case RefusalReason::bad_signature:
      return "bad_signature";
  }
  return "signature_required";
}

std::optional<Refusal> judge_signatures(const TrustedKeys& trusted, std::string_view key, std::string_view digest,
                                        const Signatures& signatures) {
  if (signatures.empty()) {
    return Refusal{RefusalReason::unsigned_entry, ""};
  }
  const Signature* failing_trusted = nullptr;
  for (const auto& signature : signatures) {
    if (trusted.find(signature.public_key) == nullptr) {
      continue;
    }
    if (signature_verifies(signature, key, digest)) {
      return std::nullopt;
    }
    failing_trusted = failing_trusted != nullptr ? failing_trusted : &signature;
  }
  if (failing_trusted != nullptr) {
    return Refusal{RefusalReason::bad_signature, base::base64_encode(failing_trusted->public_key)};
  }
  return Refusal{RefusalReason::untrusted_signer, base::base64_encode(signatures.front().public_key)};
}

SignatureRequirement default_requirement(bool trusted_keys_configured) noexcept {
  return trusted_keys_configured ? SignatureRequirement::remote : SignatureRequirement::off;
}

}  // namespace opcache::store
