// The signature side of HTTP API v1 (docs/protocol.md "Signatures"): the
// X-Opcache-Signature headers of a PUT, POST /v1/entries/{key}/signatures,
// and the server's trust policy (--trusted-keys, --require-signature).
#include "base/base64.hpp"
#include "base/json_parse.hpp"
#include "remote/signature_header.hpp"
#include "server/api.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

// The "signatures" list of a POST body, each item checked like a header's.
Result<store::Signatures> signatures_of_body(const std::string& body) {
  const std::string shape =
      "request body must be {\"signatures\": [{\"public_key\": \"<base64>\", \"signature\": \"<base64>\"}, ...]}";
  auto parsed = base::parse_json(body, "request body");
  if (!parsed) {
    return parsed.error();
  }
  auto list = parsed->is_object() ? parsed->find("signatures") : parsed->end();
  if (list == parsed->end() || !list->is_array() || list->empty()) {
    return Error::usage(shape);
  }
  store::Signatures signatures;
  for (std::size_t i = 0; i < list->size(); ++i) {
    const auto& item = (*list)[i];
    const auto field = [&item](const char* name) {
      auto it = item.is_object() ? item.find(name) : item.end();
      return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto signature = store::parse_signature(field("public_key") + ":" + field("signature"));
    if (!signature) {
      return Error::usage("signatures[" + std::to_string(i) + "]: " + signature.error().message() + "; " + shape);
    }
    store::add_signature(signatures, std::move(*signature));
  }
  return signatures;
}

}  // namespace

Result<store::Signatures> parse_signature_headers(const std::vector<std::string>& values) {
  store::Signatures signatures;
  for (const auto& value : values) {
    if (auto added = remote::add_signature_header(value, signatures); !added) {
      return Error::usage("X-Opcache-Signature header: " + added.error().message() +
                          " (expected \"<public key base64>:<signature base64>\", comma-separated)");
    }
  }
  return signatures;
}

Status Api::load_trusted_keys() {
  if (m_config.trusted_keys_file.empty()) {
    return {};
  }
  auto loaded = store::TrustedKeys::load(m_config.trusted_keys_file);
  if (!loaded) {
    return loaded.error().with_context("--trusted-keys");
  }
  auto keys = std::make_shared<const store::TrustedKeys>(std::move(*loaded));
  base::MutexLock lock(m_trust_mutex);
  m_trusted = std::move(keys);
  return {};
}

std::size_t Api::trusted_key_count() const { return trusted_keys()->keys().size(); }

std::shared_ptr<const store::TrustedKeys> Api::trusted_keys() const {
  base::MutexLock lock(m_trust_mutex);
  return m_trusted;
}

std::optional<ApiResponse> Api::refuse_signatures(const std::string& key, const std::string& digest,
                                                  const store::Signatures& signatures) {
  std::optional<store::Refusal> refusal;
  for (const auto& signature : signatures) {
    if (!store::signature_verifies(signature, key, digest)) {
      refusal = store::Refusal{store::RefusalReason::bad_signature, base::base64_encode(signature.public_key)};
      break;
    }
  }
  if (!refusal && m_config.require_signature) {
    refusal = store::judge_signatures(*trusted_keys(), key, digest, signatures);
  }
  if (!refusal) {
    return std::nullopt;
  }
  const std::string code = refusal->error_code();
  m_metrics.record_rejected_upload(code);
  std::string message = "upload of " + key + " refused: " + refusal->describe();
  if (refusal->reason == store::RefusalReason::bad_signature) {
    message += " (a signature by " + refusal->signer + " does not verify for this key and bundle digest " + digest + ")";
  } else {
    message += " (this server requires a valid signature by one of its trusted keys; sign with --signing-key)";
  }
  return error_response(403, code, message);
}

ApiResponse Api::add_signatures(const std::string& key, const std::string& body) {
  auto signatures = signatures_of_body(body);
  if (!signatures) {
    return error_response(400, "bad_request", signatures.error().message());
  }
  auto added = m_storage.add_signatures(key, *signatures);
  if (!added) {
    if (added.error().code() == ErrorCode::untrusted) {
      return error_response(403, "bad_signature", added.error().message());
    }
    return storage_failure(added.error());
  }
  if (!*added) {
    return error_response(404, "not_found", "no entry for key " + key);
  }
  return json_response(200, {{"key", key}, {"added", **added}});
}

}  // namespace opcache::server
