#include "store/key.hpp"

#include "base/canonical_json.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::store {

Result<std::string> key_preimage(const nlohmann::json& descriptor, const nlohmann::json& scenario) {
  OPCACHE_TRY_ASSIGN(std::string canonical_descriptor, base::canonical_json(descriptor));
  OPCACHE_TRY_ASSIGN(std::string canonical_scenario, base::canonical_json(scenario));
  std::string preimage(k_key_prefix);
  preimage += canonical_descriptor;
  preimage += '\n';
  preimage += canonical_scenario;
  return preimage;
}

Result<std::string> derive_key(const nlohmann::json& descriptor, const nlohmann::json& scenario) {
  OPCACHE_TRY_ASSIGN(std::string preimage, key_preimage(descriptor, scenario));
  return base::sha256_hex(preimage);
}

Status check_key(std::string_view key) {
  if (!base::is_sha256_hex(key)) {
    std::string shown(key.substr(0, 80));
    return Error::usage("\"" + shown + "\" is not a cache key (expected 64 lowercase hexadecimal characters)");
  }
  return {};
}

}  // namespace opcache::store
