// Exec manifests in HTTP API v1 (docs/protocol.md "Exec manifests", revision
// 7): GET /v1/manifests/{key} answers the manifest the storage keeps for a
// command key, PUT merges a client's into it; POST /v1/manifests/fetch
// (revision 10) answers many keys' at once. The server checks a manifest's
// shape and key, never what it points at: a client recomputes each entry key
// from the inputs it lists (store/exec_manifest.hpp), so a manifest only
// decides which entry a lookup asks for.
#include <string>
#include <vector>

#include "server/api.hpp"

namespace opcache::server {

namespace {

// The stripe of the lock that serializes the merges of `command_key` (its
// first hex digit; the router checked it is a key).
std::size_t manifest_stripe(const std::string& command_key, std::size_t stripes) {
  const char digit = command_key.front();
  const int value = digit <= '9' ? digit - '0' : digit - 'a' + 10;
  return static_cast<std::size_t>(value) % stripes;
}

}  // namespace

ApiResponse Api::get_exec_manifest(const std::string& command_key, bool head_only) {
  auto stored = m_storage.exec_manifest(command_key);
  if (!stored && stored.error().code() != ErrorCode::corrupt) {
    return storage_failure(stored.error());
  }
  if (!stored || !*stored) {
    ApiResponse absent = error_response(404, "not_found", "no exec manifest for command key " + command_key);
    if (!stored) {
      absent.log_detail = "stored exec manifest ignored: " + stored.error().message();
    }
    return absent;
  }
  ApiResponse response;
  response.body = store::exec_manifest_to_json(**stored);
  response.head_only = head_only;
  return response;
}

ApiResponse Api::fetch_exec_manifests(const std::string& body) {
  std::vector<std::string> keys;
  if (auto refused = read_key_list(body, k_manifest_batch_keys, "manifest fetch", keys)) {
    return std::move(*refused);
  }
  // {"manifests":{KEY:MANIFEST,...},"again":[KEY,...]}, the manifests'
  // text as stored (JSON objects), without parsing them again.
  std::string manifests;
  std::string again;
  for (const auto& command_key : keys) {
    if (manifests.size() >= k_manifest_batch_bytes) {
      again += (again.empty() ? "\"" : ",\"") + command_key + "\"";
      continue;
    }
    auto stored = m_storage.exec_manifest(command_key);
    if (!stored && stored.error().code() != ErrorCode::corrupt) {
      return storage_failure(stored.error());
    }
    if (stored && *stored) {
      manifests += (manifests.empty() ? "\"" : ",\"") + command_key + "\":" + store::exec_manifest_to_json(**stored);
    }
  }
  ApiResponse response;
  response.body = "{\"manifests\":{" + manifests + "},\"again\":[" + again + "]}";
  return response;
}

ApiResponse Api::put_exec_manifest(const std::string& command_key, const std::string& body) {
  if (body.size() > store::k_max_manifest_bytes) {
    return error_response(413, "payload_too_large",
                          "an exec manifest of " + std::to_string(body.size()) + " bytes is larger than the limit of " +
                              std::to_string(store::k_max_manifest_bytes));
  }
  auto manifest = store::parse_exec_manifest(body, "request body");
  if (!manifest) {
    return error_response(400, "corrupt_manifest", manifest.error().message());
  }
  if (manifest->command_key != command_key) {
    return error_response(409, "key_mismatch",
                          "the manifest is for command key " + manifest->command_key + ", not for the URL's key " +
                              command_key);
  }
  auto merged = [&] {
    base::MutexLock lock(m_manifest_locks[manifest_stripe(command_key, m_manifest_locks.size())]);
    return m_storage.merge_exec_manifest(*manifest);
  }();
  if (!merged) {
    return storage_failure(merged.error());
  }
  return json_response(200, {{"command_key", merged->command_key}, {"builds", merged->builds.size()}});
}

}  // namespace opcache::server
