// Revocation in HTTP API v1 (docs/protocol.md "Revocation"): POST
// /v1/revocations marks keys bad for the whole team, DELETE
// /v1/revocations/{key} takes the mark back, GET /v1/revocations lists the
// marks for clients to purge their stores. The tombstones live in the
// storage (Storage::revoke), so every replica over it agrees.
#include <chrono>
#include <cstdlib>

#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "base/percent_coding.hpp"
#include "server/api.hpp"
#include "store/key.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

json tombstone_item(const store::Tombstone& tombstone) {
  return {{"key", tombstone.key},
          {"reason", tombstone.reason},
          {"time", tombstone.time_s()},
          {"time_ms", tombstone.time_ms}};
}

// How far a signed revocation's time may be from the server's clock: a
// captured request cannot be replayed later than this.
constexpr std::int64_t k_signed_revocation_window_s = 300;

}  // namespace

// The keys, reason and signatures of a POST /v1/revocations body.
struct RevokeRequest {
  std::vector<std::string> keys;
  std::string reason;
  store::Signatures signatures;
  std::optional<std::int64_t> time_s;  ///< when signed
};

namespace {

Result<RevokeRequest> parse_revoke_request(const std::string& body, std::size_t max_keys) {
  const std::string shape = "request body must be {\"keys\": [\"<64 hex>\", ...], \"reason\": \"<text>\"}";
  OPCACHE_TRY_ASSIGN(auto parsed, base::parse_json(body, "request body"));
  if (!parsed.is_object() || !parsed.contains("keys") || !parsed["keys"].is_array() || parsed["keys"].empty() ||
      !parsed.contains("reason") || !parsed["reason"].is_string()) {
    return Error::usage(shape);
  }
  RevokeRequest request;
  const auto& keys = parsed["keys"];
  if (keys.size() > max_keys) {
    return Error::usage("at most " + std::to_string(max_keys) + " keys per revocation, got " +
                        std::to_string(keys.size()));
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!keys[i].is_string() || !store::check_key(keys[i].get<std::string>())) {
      return Error::usage("keys[" + std::to_string(i) + "] is not a cache key (64 lowercase hex characters)");
    }
    request.keys.push_back(keys[i].get<std::string>());
  }
  request.reason = parsed["reason"].get<std::string>();
  if (auto valid = store::check_revocation_reason(request.reason); !valid) {
    return valid.error();
  }
  if (parsed.contains("time")) {
    if (!parsed["time"].is_number_integer()) {
      return Error::usage("\"time\" must be Unix seconds (an integer)");
    }
    request.time_s = parsed["time"].get<std::int64_t>();
  }
  if (parsed.contains("signatures")) {
    const auto& list = parsed["signatures"];
    if (!list.is_array()) {
      return Error::usage("\"signatures\" must be [{\"public_key\": \"<base64>\", \"signature\": \"<base64>\"}, ...]");
    }
    for (std::size_t i = 0; i < list.size(); ++i) {
      const auto& item = list[i];
      const auto field = [&item](const char* name) {
        auto it = item.is_object() ? item.find(name) : item.end();
        return it != item.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      auto signature = store::parse_signature(field("public_key") + ":" + field("signature"));
      if (!signature) {
        return Error::usage("signatures[" + std::to_string(i) + "]: " + signature.error().message());
      }
      store::add_signature(request.signatures, std::move(*signature));
    }
    if (!request.signatures.empty() && !request.time_s) {
      return Error::usage("a signed revocation needs \"time\" (the Unix seconds it signed)");
    }
  }
  return request;
}

}  // namespace

std::optional<ApiResponse> Api::refuse_revocation(const RevokeRequest& request, std::int64_t now_s) {
  for (const auto& signature : request.signatures) {
    if (!store::revocation_signature_verifies(signature, request.keys, request.reason, *request.time_s)) {
      return error_response(403, "bad_signature",
                            "a signature of the revocation does not verify (its key, reason, time and keys are "
                            "what was signed)");
    }
  }
  const auto trusted = trusted_keys();
  if (trusted->empty()) {
    return std::nullopt;  // no trusted keys: the admin token is enough
  }
  if (request.signatures.empty()) {
    return error_response(403, "signature_required",
                          "this server trusts signing keys, so a revocation must be signed by one of them "
                          "(give opcache revoke --signing-key)");
  }
  if (request.time_s && std::abs(*request.time_s - now_s) > k_signed_revocation_window_s) {
    return error_response(403, "bad_signature",
                          "the revocation was signed at Unix second " + std::to_string(*request.time_s) +
                              ", more than " + std::to_string(k_signed_revocation_window_s) +
                              " s from the server's clock (" + std::to_string(now_s) + "): sign it again");
  }
  for (const auto& signature : request.signatures) {
    if (trusted->find(signature.public_key) != nullptr) {
      return std::nullopt;
    }
  }
  return error_response(403, "untrusted_signature",
                        "no signature of the revocation is by a key this server trusts (--trusted-keys)");
}

ApiResponse revoked_response(const store::Tombstone& tombstone, const std::string& what) {
  ApiResponse response = json_response(410, {{"error", "revoked"},
                                             {"message", what + " " + tombstone.key + " was revoked: " +
                                                             tombstone.reason + " (the server refuses it until " +
                                                             "`opcache unrevoke " + tombstone.key + "`)"},
                                             {"key", tombstone.key},
                                             {"reason", tombstone.reason},
                                             {"time", tombstone.time_s()}});
  response.headers.push_back({std::string(k_revoked_header), base::percent_encode(tombstone.reason)});
  return response;
}

ApiResponse Api::revoke(const std::string& body) {
  auto request = parse_revoke_request(body, k_max_revoke_keys);
  if (!request) {
    return error_response(400, "bad_request", request.error().message());
  }
  const std::int64_t now_ms = unix_ms_now();
  if (auto refused = refuse_revocation(*request, now_ms / 1000)) {
    return std::move(*refused);
  }
  json revoked = json::array();
  for (const auto& key : request->keys) {
    auto deleted = m_storage.revoke(store::Tombstone{key, request->reason, now_ms});
    if (!deleted) {
      return storage_failure(deleted.error());
    }
    // Requests waiting for the key end now: with 410, as it is revoked.
    (void)m_leases->release_key(key);
    m_events.notify(key);
    revoked.push_back({{"key", key}, {"deleted", *deleted}});
  }
  return json_response(200, {{"revoked", revoked}, {"reason", request->reason}, {"time", now_ms / 1000}});
}

ApiResponse Api::unrevoke(const std::string& key) {
  auto removed = m_storage.unrevoke(key);
  if (!removed) {
    return storage_failure(removed.error());
  }
  if (!*removed) {
    return error_response(404, "not_found", "key " + key + " is not revoked");
  }
  return json_response(200, {{"key", key}, {"unrevoked", true}});
}

ApiResponse Api::revocations(const std::map<std::string, std::string>& parameters) {
  if (auto unknown = unknown_parameter(parameters, {"since", "limit"})) {
    return std::move(*unknown);
  }
  auto since = integer_parameter(parameters, "since", 0, 0, 1l << 40);
  if (!since) {
    return error_response(400, "bad_request", since.error().message());
  }
  auto limit = integer_parameter(parameters, "limit", static_cast<long>(k_max_revocations_page), 1,
                                 static_cast<long>(k_max_revocations_page));
  if (!limit) {
    return error_response(400, "bad_request", limit.error().message());
  }
  // Read the clock before the storage: a tombstone written meanwhile is at
  // or after `now`, so a client asking again with since=now sees it.
  const std::int64_t now_s = unix_ms_now() / 1000;
  bool truncated = false;
  auto listed = m_storage.revocations(*since * 1000, static_cast<std::size_t>(*limit), &truncated);
  if (!listed) {
    return storage_failure(listed.error());
  }
  json items = json::array();
  for (const auto& tombstone : *listed) {
    items.push_back(tombstone_item(tombstone));
  }
  return json_response(200, {{"now", now_s}, {"revocations", items}, {"truncated", truncated}});
}

}  // namespace opcache::server
