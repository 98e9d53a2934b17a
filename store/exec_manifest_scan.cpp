#include "store/exec_manifest_scan.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include "base/json_scanner.hpp"
#include "base/sha256.hpp"

namespace opcache::store {

namespace {

using base::JsonScanner;

// Calls `each` for every element of a JSON array (at most `limit`); false when
// the text is not such an array or `each` says false.
template <typename Each>
bool scan_array(JsonScanner& in, std::size_t limit, Each each) {
  if (!in.consume('[')) {
    return false;
  }
  if (in.consume(']')) {
    return true;
  }
  std::size_t count = 0;
  do {
    if (++count > limit || !each()) {
      return false;
    }
  } while (in.consume(','));
  return in.consume(']');
}

// Calls `each(name)` for every member of a JSON object whose names are plain
// strings, after the name's ':'; false on anything else or when `each` says so.
template <typename Each>
bool scan_members(JsonScanner& in, Each each) {
  if (!in.consume('{')) {
    return false;
  }
  if (in.consume('}')) {
    return true;
  }
  do {
    std::string name;
    if (!in.plain_string(name) || !in.consume(':') || !each(std::move(name))) {
      return false;
    }
  } while (in.consume(','));
  return in.consume('}');
}

// scan_members of an object whose members are known: `bit_of(name)` gives a
// member's bit (0 for one it does not know), and each is allowed once.
template <typename BitOf, typename Each>
bool scan_object(JsonScanner& in, BitOf bit_of, Each each, unsigned& seen) {
  return scan_members(in, [&](const std::string& name) {
    const unsigned bit = bit_of(name);
    if (bit == 0 || (seen & bit) != 0 || !each(name)) {
      return false;
    }
    seen |= bit;
    return true;
  });
}

bool scan_strings(JsonScanner& in, std::size_t limit, std::vector<std::string>& out) {
  return scan_array(in, limit, [&] { return in.plain_string(out.emplace_back()); });
}

// [path, state] or [path, state, [ignored names]].
bool scan_input(JsonScanner& in, ObservedInput& input) {
  if (!in.consume('[') || !in.plain_string(input.path) || !in.consume(',') || !in.plain_string(input.state)) {
    return false;
  }
  if (in.consume(',') && !scan_strings(in, SIZE_MAX, input.ignored)) {
    return false;
  }
  return in.consume(']');
}

// The identities of `seen`: an object of plain strings, each path once.
bool scan_seen(JsonScanner& in, std::map<std::string, std::string>& seen) {
  return scan_members(in, [&](std::string path) {
    std::string identity;
    return in.plain_string(identity) && seen.emplace(std::move(path), std::move(identity)).second;
  });
}

unsigned build_member_bit(const std::string& name) {
  return name == "entry" ? 1u : name == "created" ? 2u : name == "outputs" ? 4u : name == "inputs" ? 8u
         : name == "seen" ? 16u : 0u;
}

bool scan_build(JsonScanner& in, ManifestBuild& build) {
  auto member = [&](const std::string& name) {
    switch (build_member_bit(name)) {
      case 1: return in.plain_string(build.entry);
      case 2: return in.plain_string(build.created);
      case 4: return scan_strings(in, SIZE_MAX, build.outputs);
      case 8: return scan_array(in, SIZE_MAX, [&] { return scan_input(in, build.inputs.emplace_back()); });
      default: return scan_seen(in, build.seen);
    }
  };
  unsigned seen = 0;
  return scan_object(in, build_member_bit, member, seen) && (seen & 13u) == 13u && vet_manifest_build(build).ok();
}

unsigned document_member_bit(const std::string& name) {
  return name == "format" ? 1u : name == "version" ? 2u : name == "command_key" ? 4u : name == "builds" ? 8u : 0u;
}

bool scan_document(JsonScanner& in, ExecManifest& manifest) {
  auto member = [&](const std::string& name) {
    std::string text;
    std::uint64_t number = 0;
    switch (document_member_bit(name)) {
      case 1: return in.plain_string(text) && text == "opcache-exec-manifest";
      case 2: return in.unsigned_integer(number) && number == static_cast<std::uint64_t>(k_exec_manifest_version);
      case 4: return in.plain_string(manifest.command_key) && base::is_sha256_hex(manifest.command_key);
      default:
        return scan_array(in, k_max_manifest_builds, [&] { return scan_build(in, manifest.builds.emplace_back()); });
    }
  };
  unsigned seen = 0;
  return scan_object(in, document_member_bit, member, seen) && seen == 15u && in.at_end();
}

}  // namespace

std::optional<ExecManifest> scan_local_exec_manifest(std::string_view text) {
  if (text.size() > k_max_manifest_bytes) {
    return std::nullopt;
  }
  JsonScanner in(text);
  ExecManifest manifest;
  if (!scan_document(in, manifest)) {
    return std::nullopt;
  }
  return manifest;
}

}  // namespace opcache::store
