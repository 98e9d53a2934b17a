// Which remotes a client uses and how: `--remote` flags, OPCACHE_REMOTE, or
// `[remote "NAME"]` sections of the config file, each with attributes
// (docs/remotes.md). Tokens come from --token-file / OPCACHE_TOKEN or a
// section's token_file, never from the command line.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "opcache/result.hpp"
#include "store/scenario.hpp"

namespace opcache::remote {

/// One remote and its attributes.
struct RemoteOptions {
  std::string url;               ///< http(s)://host[:port], s3://bucket/prefix?…, file:///dir
  bool read_only = false;        ///< never upload (push refuses too)
  bool upload = false;           ///< upload new local entries in the background
  long connect_timeout_ms = 2000;
  long timeout_ms = 30000;       ///< per request
  int retries = 2;               ///< extra attempts for idempotent requests
  int parallelism = 8;           ///< concurrent transfers in push/pull
  int cooldown_s = 60;           ///< circuit breaker: how long a failed remote is skipped
  std::int64_t prefetch = 10000; ///< pull a scenario on its first miss when it has at most this many entries (0: never)
  std::string ca_file;           ///< https: trust these CA certificates (PEM) instead of the system's
  std::string token;             ///< bearer token for http(s); never printed
  std::string source;            ///< where it was configured, for messages
};

/// Parses "URL[|attribute[=value]]…": read-only, upload, connect-timeout=MS,
/// timeout=MS, retries=N, parallelism=N (1 to 256), cooldown=S, prefetch=N, ca-file=PATH. `usage` errors
/// name the attribute and the value (base::value_error). The URL scheme must be one of the scheme table's.
Result<RemoteOptions> parse_remote_spec(const std::string& spec, const std::string& source);

/// Explicit choices (flags).
struct RemoteOverrides {
  std::vector<std::string> remotes;  ///< --remote, in order
  std::optional<std::filesystem::path> token_file;
  bool no_remote = false;            ///< --no-remote: use none
};

/// The remotes to use, in lookup order: --remote flags if any, else
/// OPCACHE_REMOTE (separated by whitespace or ';'), else the config file's
/// [remote "…"] sections in file order. The token for http(s) remotes: a
/// section's token_file, else --token-file, else OPCACHE_TOKEN.
Result<std::vector<RemoteOptions>> resolve_remotes(const RemoteOverrides& overrides, const base::EnvLookup& env,
                                                   const std::optional<std::filesystem::path>& config_file);

/// The URL with credentials removed, for messages and the breaker state file.
std::string display_url(const std::string& url);

}  // namespace opcache::remote
