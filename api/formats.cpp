#include "opcache/formats.hpp"

#include "store/index.hpp"
#include "store/key.hpp"
#include "store/manifest.hpp"

namespace opcache {

std::string key_derivation_version() {
  // The prefix is the version followed by the newline that ends its line.
  return std::string(store::k_key_prefix.substr(0, store::k_key_prefix.size() - 1));
}

std::uint32_t bundle_format_version() noexcept {
  return store::k_bundle_format_version;
}

int index_schema_version() noexcept {
  return store::k_index_schema_version;
}

}  // namespace opcache
