// Configuration of `opcache serve`: one table of settings from which the
// flags (cli/cmd_serve.cpp), the INI file's [serve] keys, the environment
// variables and the help text are all derived. Precedence: flag >
// environment > INI > default. Documented in docs/operations.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/environment.hpp"
#include "opcache/result.hpp"

namespace opcache::server {

/// One address to listen on.
struct ListenAddress {
  std::string host;    ///< numeric IPv4/IPv6 address or "localhost"
  std::uint16_t port;  ///< 0 picks a free port (reported at start-up)
};

/// Parses "HOST:PORT", "[V6]:PORT" or ":PORT" (= 0.0.0.0). `usage` error otherwise.
Result<ListenAddress> parse_listen_address(const std::string& text);

enum class LogFormat { text, json };

/// Everything the server needs to run.
struct ServerConfig {
  std::vector<ListenAddress> listen = {{"127.0.0.1", 8080}};
  int threads = 2;                               ///< I/O threads
  int workers = 4;                               ///< threads for storage work (disk, S3)
  std::string storage;                           ///< local directory, or s3://bucket/prefix?...
  std::filesystem::path tokens_file;             ///< empty: no tokens (then only anonymous access)
  bool anonymous_read = false;                   ///< allow reads without a token
  std::filesystem::path tls_cert;                ///< PEM certificate chain; with tls_key enables TLS
  std::filesystem::path tls_key;                 ///< PEM private key
  std::uint64_t max_body_bytes = 512ull << 20;   ///< largest accepted upload (413 above)
  std::uint32_t max_header_bytes = 16 << 10;     ///< largest request header block (431/400 above)
  std::uint32_t max_query_keys = 10000;          ///< keys per POST /v1/entries/query
  int request_timeout_s = 120;                   ///< a whole request must arrive and be answered within this
  int idle_timeout_s = 30;                       ///< keep-alive connections idle longer are closed
  int shutdown_grace_s = 30;                     ///< SIGTERM: in-flight requests get this long
  int max_inflight = 256;                        ///< concurrent storage operations before 429
  std::uint64_t bundle_cache_bytes = 64u << 20;  ///< small bundles of a local store kept in memory (0: none)
  LogFormat log_format = LogFormat::text;
  std::filesystem::path access_log;         ///< empty or "-": standard error
  int access_log_flush_ms = 1000;           ///< access-log lines wait in memory at most this long (0: none)
  std::filesystem::path port_file;          ///< if set, bound ports are written here (one per line) when ready
  std::filesystem::path temp_dir;           ///< uploads to S3 are spooled here (default: system temp)
  std::filesystem::path trusted_keys_file;  ///< NAME:BASE64 per line (store/trust.hpp); reloaded on SIGHUP
  bool require_signature = false;           ///< refuse uploads without a valid signature by a trusted key
  int lease_ttl_s = 60;                     ///< a build lease not renewed for this long expires
  int max_wait_s = 60;                      ///< longest ?wait= a GET or HEAD of an entry may hold
  std::string replica;                      ///< this replica's name in the bucket and /metrics ("": host:port)
  int stats_interval_s = 10;                ///< usage counters are written to a shared bucket this often
  bool redirect_downloads = false;          ///< GET of a bundle in a bucket answers 307 to a presigned URL
  int redirect_expiry_s = 300;              ///< how long a presigned download URL stays valid

  bool tls() const { return !tls_cert.empty(); }
};

/// Where ServerConfig holds one setting; the alternative also decides how
/// its text is parsed (integers within the row's range, booleans by
/// base::parse_bool, listen as a comma list of addresses, log_format as text
/// or json, paths and text as given).
using ServeField =
    std::variant<std::string ServerConfig::*, std::filesystem::path ServerConfig::*, bool ServerConfig::*,
                 int ServerConfig::*, std::uint32_t ServerConfig::*, std::uint64_t ServerConfig::*,
                 std::vector<ListenAddress> ServerConfig::*, LogFormat ServerConfig::*>;

/// One row of serve's settings table: every surface of one setting.
struct ServeSetting {
  std::string_view flag;        ///< CLI11 names ("--listen,-l"); a boolean also gets "--no-<name>"
  std::string_view key;         ///< key in the INI file's [serve] section
  std::string_view env;         ///< environment variable: OPCACHE_SERVE_ and the key in upper case
  ServeField field;             ///< where the value goes
  std::int64_t min = 0;         ///< integers: smallest accepted value
  std::int64_t max = 0;         ///< integers: largest accepted value
  std::string_view value_name;  ///< the value in help ("N", "FILE", "BYTES"); "" for booleans
  std::string_view help;        ///< what it does
  std::string_view when_unset;  ///< the default of a text or path row in words ("standard error"); "" = none
};

/// Every row, in help order. Static storage; thread-safe.
std::span<const ServeSetting> serve_settings() noexcept;

/// True when the row is a yes/no setting (a flag without a value, with a --no- form).
bool is_boolean(const ServeSetting& row) noexcept;

/// The first long flag of a row ("--listen" of "--listen,-l").
std::string primary_flag(const ServeSetting& row);

/// The row's default as text, taken from a default ServerConfig ("2",
/// "false", "127.0.0.1:8080", or `when_unset`, else "none"). Pure.
std::string default_text(const ServeSetting& row);

/// The help line of a row: its help, the range of an integer, the default,
/// the INI key and the environment variable. Pure.
std::string serve_help(const ServeSetting& row);

/// Parses `text` by the row's type into `config`. A `usage` error
/// `<where> "<text>" must be ...` otherwise, with `where` naming the surface
/// ("--threads", "environment variable OPCACHE_SERVE_THREADS",
/// "/etc/opcache.conf: [serve] threads"). `listen` replaces the whole list.
Status apply_serve_setting(ServerConfig& config, const ServeSetting& row, const std::string& where,
                           const std::string& text);

/// Reads an INI file's [serve] section into `config` (the rows' keys).
/// Unknown sections and keys are `usage` errors, as are malformed values.
Status load_server_config_file(const std::filesystem::path& path, ServerConfig& config);

/// Applies every row's environment variable that is set and not empty; a
/// malformed value is a `usage` error naming the variable and the value.
Status load_server_environment(const base::EnvLookup& env, ServerConfig& config);

/// Checks the combination (storage set, TLS cert and key together,
/// require_signature only with trusted keys, ranges).
Status validate_server_config(const ServerConfig& config);

}  // namespace opcache::server
