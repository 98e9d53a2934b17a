#include "store/manifest_scan.hpp"

#include <cstdint>
#include <string>

#include "base/json_scanner.hpp"
#include "base/sha256.hpp"

namespace opcache::store {

namespace {

using base::JsonScanner;

// One member object: exactly name, size, sha256 and role, once each.
bool scan_member(JsonScanner& in, MemberEntry& member) {
  if (!in.consume('{')) {
    return false;
  }
  unsigned seen = 0;
  do {
    std::string field;
    if (!in.plain_string(field) || !in.consume(':')) {
      return false;
    }
    unsigned bit = 0;
    bool ok = false;
    if (field == "name") {
      bit = 1, ok = in.plain_string(member.name);
    } else if (field == "size") {
      bit = 2, ok = in.unsigned_integer(member.size);
    } else if (field == "sha256") {
      bit = 4, ok = in.plain_string(member.sha256);
    } else if (field == "role") {
      bit = 8, ok = in.plain_string(member.role);
    }
    if (!ok || (seen & bit) != 0) {
      return false;
    }
    seen |= bit;
  } while (in.consume(','));
  return seen == 15 && in.consume('}');
}

bool scan_members(JsonScanner& in, std::vector<MemberEntry>& members) {
  if (!in.consume('[')) {
    return false;
  }
  if (in.consume(']')) {
    return true;
  }
  do {
    MemberEntry member{};
    if (!scan_member(in, member)) {
      return false;
    }
    members.push_back(std::move(member));
  } while (in.consume(','));
  return in.consume(']');
}

// Reads the value of top-level `field` into `manifest`; `bit` marks it seen.
bool scan_field(JsonScanner& in, const std::string& field, Manifest& manifest, unsigned& bit) {
  std::string text;
  std::uint64_t number = 0;
  if (field == "key") {
    return bit = 1, in.plain_string(manifest.key);
  }
  if (field == "members") {
    return bit = 2, scan_members(in, manifest.members);
  }
  if (field == "created") {
    return bit = 4, in.plain_string(manifest.created);
  }
  if (field == "build_ms") {
    bit = 8;
    if (!in.unsigned_integer(number) || number > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    manifest.build_ms = static_cast<std::int64_t>(number);
    return true;
  }
  if (field == "format") {
    return bit = 16, in.plain_string(text) && text == "opcache-bundle";
  }
  if (field == "format_version") {
    return bit = 32, in.unsigned_integer(number) && number == k_bundle_format_version;
  }
  if (field == "compression") {
    return bit = 64, in.plain_string(text) && text == "zstd";
  }
  if (field == "descriptor" || field == "scenario" || field == "producer") {
    bit = field == "descriptor" ? 128u : field == "scenario" ? 256u : 512u;
    return in.peek('{') && in.skip_value();
  }
  return false;
}

}  // namespace

std::optional<Manifest> scan_manifest_for_hit(std::string_view text, const BundleLimits& limits) {
  JsonScanner in(text);
  Manifest manifest;
  if (!in.consume('{')) {
    return std::nullopt;
  }
  unsigned seen = 0;
  do {
    std::string field;
    unsigned bit = 0;
    if (!in.plain_string(field) || !in.consume(':') || !scan_field(in, field, manifest, bit) || (seen & bit) != 0) {
      return std::nullopt;
    }
    seen |= bit;
  } while (in.consume(','));
  if (!in.consume('}') || !in.at_end() || seen != 1023 || !base::is_sha256_hex(manifest.key) ||
      !check_member_entries(manifest.members, limits)) {
    return std::nullopt;
  }
  return manifest;
}

}  // namespace opcache::store
