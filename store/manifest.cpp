#include "store/manifest.hpp"

#include <ctime>
#include <limits>
#include <set>

#include "base/canonical_json.hpp"
#include "store/descriptor.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "base/utc_time.hpp"
#include "base/utf8.hpp"

namespace opcache::store {

namespace {

using json = nlohmann::json;

const std::set<std::string> k_roles = {"object", "metadata", "info", "package", "other"};

Result<const json*> require_field(const json& object, const char* name, json::value_t type, const char* what) {
  auto it = object.find(name);
  if (it == object.end()) {
    return Error::corrupt(std::string("manifest has no \"") + name + "\"");
  }
  bool type_ok = it->type() == type ||
                 (type == json::value_t::number_unsigned && it->type() == json::value_t::number_integer &&
                  it->get<std::int64_t>() >= 0);
  if (!type_ok) {
    return Error::corrupt(std::string("manifest field \"") + name + "\" must be " + what);
  }
  return &*it;
}

Status check_known_fields(const json& object, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [name, value] : object.items()) {
    if (known.count(name) == 0) {
      return Error::corrupt(where + " has unknown field \"" + name + "\"");
    }
  }
  return {};
}

Result<MemberEntry> member_from_json(const json& value, std::size_t index, const BundleLimits& limits) {
  std::string where = "manifest member " + std::to_string(index);
  if (!value.is_object()) {
    return Error::corrupt(where + " is not an object");
  }
  OPCACHE_TRY(check_known_fields(value, {"name", "size", "sha256", "role"}, where));
  MemberEntry member;
  OPCACHE_TRY_ASSIGN(const json* name, require_field(value, "name", json::value_t::string, "a string"));
  member.name = name->get<std::string>();
  if (auto status = check_member_name(member.name); !status) {
    return Error::corrupt(where + ": " + status.error().message());
  }
  OPCACHE_TRY_ASSIGN(const json* size, require_field(value, "size", json::value_t::number_unsigned,
                                                     "a non-negative integer"));
  member.size = size->get<std::uint64_t>();
  if (member.size > limits.max_member_bytes) {
    return Error::corrupt(where + " (\"" + member.name + "\") declares " + std::to_string(member.size) +
                          " bytes, above the limit of " + std::to_string(limits.max_member_bytes));
  }
  OPCACHE_TRY_ASSIGN(const json* sha, require_field(value, "sha256", json::value_t::string, "a string"));
  member.sha256 = sha->get<std::string>();
  if (!base::is_sha256_hex(member.sha256)) {
    return Error::corrupt(where + " (\"" + member.name + "\") has a malformed sha256");
  }
  OPCACHE_TRY_ASSIGN(const json* role, require_field(value, "role", json::value_t::string, "a string"));
  member.role = role->get<std::string>();
  if (k_roles.count(member.role) == 0) {
    return Error::corrupt(where + " (\"" + member.name + "\") has unknown role \"" + member.role + "\"");
  }
  return member;
}

Result<Producer> producer_from_json(const json& value) {
  if (!value.is_object()) {
    return Error::corrupt("manifest field \"producer\" must be an object");
  }
  Producer producer;
  OPCACHE_TRY_ASSIGN(const json* tool, require_field(value, "tool", json::value_t::string, "a string"));
  producer.tool = tool->get<std::string>();
  OPCACHE_TRY_ASSIGN(const json* version, require_field(value, "version", json::value_t::string, "a string"));
  producer.version = version->get<std::string>();
  if (auto host = value.find("host"); host != value.end()) {
    if (!host->is_string()) {
      return Error::corrupt("manifest field \"producer.host\" must be a string");
    }
    producer.host = host->get<std::string>();
  }
  return producer;
}

Status check_members(const std::vector<MemberEntry>& members, const BundleLimits& limits) {
  if (members.empty()) {
    return Error::corrupt("manifest lists no members");
  }
  if (members.size() > limits.max_members) {
    return Error::corrupt("manifest lists " + std::to_string(members.size()) + " members, above the limit of " +
                          std::to_string(limits.max_members));
  }
  std::set<std::string> names;
  std::uint64_t total = 0;
  for (const auto& member : members) {
    if (!names.insert(member.name).second) {
      return Error::corrupt("manifest lists member \"" + member.name + "\" twice");
    }
    total += member.size;
    if (total > limits.max_total_bytes) {
      return Error::corrupt("manifest members add up to more than the limit of " +
                            std::to_string(limits.max_total_bytes) + " bytes");
    }
  }
  return {};
}

// "YYYY-MM-DDTHH:MM:SSZ", the only form writers produce.
bool is_rfc3339_utc(const std::string& text) {
  static constexpr char k_shape[] = "dddd-dd-ddTdd:dd:ddZ";
  if (text.size() != sizeof k_shape - 1) {
    return false;
  }
  for (std::size_t i = 0; i < text.size(); ++i) {
    bool ok = k_shape[i] == 'd' ? (text[i] >= '0' && text[i] <= '9') : text[i] == k_shape[i];
    if (!ok) {
      return false;
    }
  }
  return true;
}

// A stored scenario must be complete (no environment defaults) and exactly
// the object a valid Scenario serializes to.
Status check_scenario(const json& value) {
  if (!value.contains("device_mode")) {
    return Error::corrupt("manifest scenario has no \"device_mode\"");
  }
  EnvLookup no_environment = [](const char*) -> std::optional<std::string> { return std::nullopt; };
  auto scenario = scenario_from_json(value, "manifest scenario", no_environment);
  if (!scenario) {
    return Error::corrupt(scenario.error().message());
  }
  if (scenario_to_json(*scenario) != value) {
    return Error::corrupt("manifest scenario is not in canonical form (an empty \"extra\" must be omitted)");
  }
  return {};
}

}  // namespace

std::string Manifest::op_type() const {
  auto it = descriptor.find("op_type");
  return it != descriptor.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t Manifest::total_size() const {
  std::uint64_t total = 0;
  for (const auto& member : members) {
    total += member.size;
  }
  return total;
}

Status check_member_name(std::string_view name) {
  auto quoted = [&] { return "member name \"" + std::string(name.substr(0, 64)) + "\""; };
  if (name.empty() || name.size() > 255) {
    return Error::usage(quoted() + " must be 1 to 255 bytes long");
  }
  if (name == "." || name.find("..") != std::string_view::npos) {
    return Error::usage(quoted() + " must not be \".\" or contain \"..\"");
  }
  for (char c : name) {
    auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7f) {
      return Error::usage("member name contains a control character");
    }
    if (c == '/' || c == '\\') {
      return Error::usage(quoted() + " must be a base name (no '/' or '\\')");
    }
  }
  if (!base::is_valid_utf8(name)) {
    return Error::usage("member name is not valid UTF-8");
  }
  return {};
}

bool check_member_entries(const std::vector<MemberEntry>& members, const BundleLimits& limits) {
  for (const auto& member : members) {
    if (!check_member_name(member.name) || member.size > limits.max_member_bytes ||
        !base::is_sha256_hex(member.sha256) || k_roles.count(member.role) == 0) {
      return false;
    }
  }
  return static_cast<bool>(check_members(members, limits));
}

std::string role_for_member_name(std::string_view name) {
  auto ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".o") || ends_with(".cubin") || ends_with(".bin")) {
    return "object";
  }
  if (ends_with(".json")) {
    return "metadata";
  }
  if (ends_with(".info")) {
    return "info";
  }
  if (ends_with(".run")) {
    return "package";
  }
  return "other";
}

json manifest_to_json(const Manifest& manifest) {
  json members = json::array();
  for (const auto& member : manifest.members) {
    members.push_back({{"name", member.name}, {"size", member.size}, {"sha256", member.sha256}, {"role", member.role}});
  }
  json producer = {{"tool", manifest.producer.tool}, {"version", manifest.producer.version}};
  if (!manifest.producer.host.empty()) {
    producer["host"] = manifest.producer.host;
  }
  return {{"format", "opcache-bundle"},
          {"format_version", k_bundle_format_version},
          {"key", manifest.key},
          {"descriptor", manifest.descriptor},
          {"scenario", manifest.scenario},
          {"members", members},
          {"compression", "zstd"},
          {"producer", producer},
          {"created", manifest.created},
          {"build_ms", manifest.build_ms}};
}

Result<Manifest> manifest_from_json(const json& value, const BundleLimits& limits, KeyCheck key_check) {
  if (!value.is_object()) {
    return Error::corrupt("manifest is not a JSON object");
  }
  OPCACHE_TRY(check_known_fields(value, {"format", "format_version", "key", "descriptor", "scenario", "members",
                                         "compression", "producer", "created", "build_ms"},
                                 "manifest"));
  OPCACHE_TRY_ASSIGN(const json* format, require_field(value, "format", json::value_t::string, "a string"));
  if (*format != "opcache-bundle") {
    return Error::corrupt("manifest format is not \"opcache-bundle\"");
  }
  OPCACHE_TRY_ASSIGN(const json* version, require_field(value, "format_version", json::value_t::number_unsigned,
                                                        "an integer"));
  if (version->get<std::uint64_t>() != k_bundle_format_version) {
    return Error::corrupt("manifest format_version " + version->dump() + " is not supported (this opcache reads " +
                          std::to_string(k_bundle_format_version) + ")");
  }
  OPCACHE_TRY_ASSIGN(const json* compression, require_field(value, "compression", json::value_t::string, "a string"));
  if (*compression != "zstd") {
    return Error::corrupt("manifest compression " + compression->dump() + " is not supported (only \"zstd\")");
  }

  Manifest manifest;
  OPCACHE_TRY_ASSIGN(const json* key, require_field(value, "key", json::value_t::string, "a string"));
  manifest.key = key->get<std::string>();
  if (!base::is_sha256_hex(manifest.key)) {
    return Error::corrupt("manifest key is not 64 lowercase hexadecimal characters");
  }
  OPCACHE_TRY_ASSIGN(const json* descriptor, require_field(value, "descriptor", json::value_t::object, "an object"));
  if (auto checked = stored_descriptor(*descriptor, "manifest"); !checked) {
    return Error::corrupt(checked.error().message());
  }
  manifest.descriptor = *descriptor;
  OPCACHE_TRY_ASSIGN(const json* scenario, require_field(value, "scenario", json::value_t::object, "an object"));
  OPCACHE_TRY(check_scenario(*scenario));
  manifest.scenario = *scenario;

  OPCACHE_TRY_ASSIGN(const json* members, require_field(value, "members", json::value_t::array, "an array"));
  if (members->size() > limits.max_members) {
    return Error::corrupt("manifest lists " + std::to_string(members->size()) + " members, above the limit of " +
                          std::to_string(limits.max_members));
  }
  for (std::size_t i = 0; i < members->size(); ++i) {
    OPCACHE_TRY_ASSIGN(MemberEntry member, member_from_json((*members)[i], i, limits));
    manifest.members.push_back(std::move(member));
  }
  OPCACHE_TRY(check_members(manifest.members, limits));

  OPCACHE_TRY_ASSIGN(const json* producer, require_field(value, "producer", json::value_t::object, "an object"));
  OPCACHE_TRY_ASSIGN(manifest.producer, producer_from_json(*producer));
  OPCACHE_TRY_ASSIGN(const json* created, require_field(value, "created", json::value_t::string, "a string"));
  manifest.created = created->get<std::string>();
  if (!is_rfc3339_utc(manifest.created)) {
    return Error::corrupt("manifest field \"created\" is not an RFC 3339 UTC time like 2026-11-22T00:51:54Z");
  }
  OPCACHE_TRY_ASSIGN(const json* build_ms, require_field(value, "build_ms", json::value_t::number_unsigned,
                                                         "a non-negative integer"));
  if (build_ms->is_number_unsigned() && build_ms->get<std::uint64_t>() > std::numeric_limits<std::int64_t>::max()) {
    return Error::corrupt("manifest field \"build_ms\" is out of range");
  }
  manifest.build_ms = build_ms->get<std::int64_t>();

  if (key_check == KeyCheck::trust_digest) {
    return manifest;
  }
  auto recomputed = derive_key(manifest.descriptor, manifest.scenario);
  if (!recomputed) {
    return Error::corrupt("manifest descriptor or scenario cannot be hashed: " + recomputed.error().message());
  }
  if (*recomputed != manifest.key) {
    return Error::corrupt("manifest key " + manifest.key + " does not match its descriptor and scenario (they hash to " +
                          *recomputed + ")");
  }
  return manifest;
}

std::string rfc3339_now() {
  return base::utc_text(static_cast<std::int64_t>(std::time(nullptr)) * 1000, "%Y-%m-%dT%H:%M:%SZ");
}

}  // namespace opcache::store
