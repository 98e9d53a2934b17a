// How opcache lays out a bucket (docs/formats.md, "S3 layout"), shared by the
// server's S3 storage and the client's s3:// remote so both read and write
// the same objects:
//   <prefix>/v1/bundles/<key>                                        the bundle bytes
//   <prefix>/v1/index/<device>/<phase>/<toolchain>/<soc>/<op_type>/<key>  an empty marker, for listing
//   <prefix>/v1/signatures/<key>                                     the entry's signatures (text form), if any
//   <prefix>/v1/revocations/<key>.json                               a revoked key's tombstone (store/revocation.hpp)
//   <prefix>/v1/manifests/<command key>.json                         an exec manifest (store/exec_manifest.hpp)
//   <prefix>/v1/stats/replicas/<replica>.json                        a server replica's usage counters (server/team_usage)
// Path components are percent-encoded (only A-Z a-z 0-9 - . _ stay).
#pragma once

#include <map>
#include <optional>
#include <string>

namespace opcache::remote {

/// The fields of an entry that its index marker's name carries.
struct S3IndexFields {
  std::string device_mode;
  std::string phase;
  std::string toolchain;
  std::string soc;
  std::string op_type;
};

/// "v1/bundles/<key>".
std::string s3_bundle_name(const std::string& key);

/// "v1/signatures/<key>": the entry's signatures, one "<public key
/// base64>:<signature base64>" a line (store/signature.hpp). Absent for an
/// unsigned entry (and for every entry written before layout version 2).
std::string s3_signatures_name(const std::string& key);

/// "v1/revocations/" — every tombstone starts with it.
inline constexpr const char* k_s3_revocations_root = "v1/revocations/";

/// "v1/revocations/<key>.json": the tombstone of a revoked key
/// (store/revocation.hpp, the same JSON as a tombstone file).
std::string s3_tombstone_name(const std::string& key);

/// "v1/manifests/<command key>.json": the exec manifest of a command key
/// (the JSON of store/exec_manifest.hpp), replaced whole by each merge.
std::string s3_exec_manifest_name(const std::string& command_key);

/// "v1/stats/replicas/" — every replica's usage counters start with it.
inline constexpr const char* k_s3_usage_root = "v1/stats/replicas/";

/// "v1/stats/replicas/<replica>.json" (the name percent-encoded as a path
/// component): the usage counters one `opcache serve` replica over a shared
/// bucket writes every stats interval (docs/formats.md "Replica usage").
std::string s3_usage_name(const std::string& replica);

/// "v1/index/" — every marker starts with it.
inline constexpr const char* k_s3_index_root = "v1/index/";

/// The marker name of an entry.
std::string s3_index_name(const S3IndexFields& fields, const std::string& key);

/// The longest marker-name prefix fixed by the leading non-empty fields
/// (device, then phase, toolchain, soc, op_type), for narrowing a listing.
std::string s3_index_prefix(const S3IndexFields& filter);

/// Parses a marker name back; nullopt when it is not one.
std::optional<std::pair<S3IndexFields, std::string>> parse_s3_index_name(const std::string& name);

/// Percent-encodes a path component (A-Z a-z 0-9 - . _ stay).
std::string s3_component_encode(const std::string& text);
std::string s3_component_decode(const std::string& text);

/// Metadata stored on a bundle object: its digest and the name of its marker.
inline constexpr const char* k_s3_meta_digest = "opcache-digest";
inline constexpr const char* k_s3_meta_index = "opcache-index";

}  // namespace opcache::remote
