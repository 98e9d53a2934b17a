// The lookup hint headers of HTTP API v1 revision 4 (docs/protocol.md
// "Lookup hints"): on a lookup of an opcache server (GET and HEAD of
// /v1/entries/{key}, POST /v1/leases/{key}) a client that knows what it
// looks up names the descriptor's op type and the scenario, so that the
// server can count hits per op type and group its misses into "what to
// pre-build next". Hints for statistics only: a server trusts them for
// nothing else, and one that does not know them ignores them. Shared, like
// remote/signature_header.hpp, by the http remote and the server
// (server/usage_stats.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace opcache::remote {

/// The header naming the descriptor's op type, as sent.
inline constexpr const char* k_op_type_header = "X-Opcache-Op-Type";
/// The header carrying the scenario: base64url without padding of its
/// canonical (JCS) JSON, the object hashed into the key.
inline constexpr const char* k_scenario_header = "X-Opcache-Scenario";
/// The longest op type sent (bytes of printable ASCII, 0x20-0x7e).
inline constexpr std::size_t k_max_op_type_header = 128;
/// The longest scenario header value sent (bytes of base64url).
inline constexpr std::size_t k_max_scenario_header = 2048;

/// Whether `value` may be an X-Opcache-Op-Type value: 1 to
/// k_max_op_type_header bytes of printable ASCII (0x20-0x7e). The client
/// sends no other; the server ignores any other. Pure; thread-safe.
bool is_op_type_header_value(std::string_view value);

/// What a lookup is for, when the caller knows it. Empty fields: unknown
/// (a lookup by key alone, a pull). Cheap to copy.
struct LookupHint {
  std::string op_type;        ///< the descriptor's "op_type"
  std::string scenario_json;  ///< the scenario's canonical JSON (RFC 8785), as hashed into the key
};

/// The hint of a lookup of a descriptor with op type `op_type` in the
/// scenario `scenario` (store::scenario_to_json). A scenario that has no
/// canonical form (it always has one when a key was derived from it) is left
/// out. Pure; thread-safe.
LookupHint make_lookup_hint(std::string op_type, const nlohmann::json& scenario);

/// The two header values of a hint; an empty value is not sent.
struct LookupHeaderValues {
  std::string op_type;   ///< X-Opcache-Op-Type: the op type, or "" when unknown, longer than
                         ///< k_max_op_type_header or not printable ASCII
  std::string scenario;  ///< X-Opcache-Scenario: base64url (no padding) of the scenario JSON, or ""
                         ///< when unknown or longer than k_max_scenario_header once encoded
};

/// The header values for `hint`, within the limits of the protocol. Pure; thread-safe.
LookupHeaderValues lookup_header_values(const LookupHint& hint);

/// The request header lines ("Name: value") for `hint`: zero, one or two. Pure; thread-safe.
std::vector<std::string> lookup_header_lines(const LookupHint& hint);

}  // namespace opcache::remote
