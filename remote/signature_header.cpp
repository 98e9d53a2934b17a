#include "remote/signature_header.hpp"

#include "base/try.hpp"

namespace opcache::remote {

Result<store::Signatures> parse_signature_header(std::string_view value) {
  store::Signatures signatures;
  OPCACHE_TRY(add_signature_header(value, signatures));
  return signatures;
}

Status add_signature_header(std::string_view value, store::Signatures& signatures) {
  while (!value.empty()) {
    const auto end = value.find(',');
    auto item = value.substr(0, end);
    value = end == std::string_view::npos ? std::string_view() : value.substr(end + 1);
    const auto first = item.find_first_not_of(" \t");
    if (first == std::string_view::npos) {
      continue;
    }
    item = item.substr(first, item.find_last_not_of(" \t") + 1 - first);
    OPCACHE_TRY_ASSIGN(store::Signature signature, store::parse_signature(item));
    store::add_signature(signatures, std::move(signature));
  }
  return {};
}

}  // namespace opcache::remote
