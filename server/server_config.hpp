// Configuration of `opcache serve`: flags, an optional INI file ([serve]
// section), and defaults. Documented in docs/operations.md.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

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
  int threads = 2;                        ///< I/O threads
  int workers = 4;                        ///< threads for storage work (disk, S3)
  std::string storage;                    ///< local directory, or s3://bucket/prefix?...
  std::filesystem::path tokens_file;      ///< empty: no tokens (then only anonymous access)
  bool anonymous_read = false;            ///< allow reads without a token
  std::filesystem::path tls_cert;         ///< PEM certificate chain; with tls_key enables TLS
  std::filesystem::path tls_key;          ///< PEM private key
  std::uint64_t max_body_bytes = 512ull << 20;  ///< largest accepted upload (413 above)
  std::uint32_t max_header_bytes = 16 << 10;    ///< largest request header block (431/400 above)
  std::uint32_t max_query_keys = 10000;   ///< keys per POST /v1/entries/query
  int request_timeout_s = 120;            ///< a whole request must arrive and be answered within this
  int idle_timeout_s = 30;                ///< keep-alive connections idle longer are closed
  int shutdown_grace_s = 30;              ///< SIGTERM: in-flight requests get this long
  int max_inflight = 256;                 ///< concurrent storage operations before 429
  std::size_t bundle_cache_bytes = 64u << 20;  ///< small bundles of a local store kept in memory (0: none)
  LogFormat log_format = LogFormat::text;
  std::filesystem::path access_log;       ///< empty or "-": standard error
  std::filesystem::path port_file;        ///< if set, bound ports are written here (one per line) when ready
  std::filesystem::path temp_dir;         ///< uploads to S3 are spooled here (default: system temp)
  std::filesystem::path trusted_keys_file;  ///< NAME:BASE64 per line (store/trust.hpp); reloaded on SIGHUP
  bool require_signature = false;         ///< refuse uploads without a valid signature by a trusted key
  int lease_ttl_s = 60;                   ///< a build lease not renewed for this long expires
  int max_wait_s = 60;                    ///< longest ?wait= a GET or HEAD of an entry may hold

  bool tls() const { return !tls_cert.empty(); }
};

/// Reads an INI file's [serve] section into `config` (keys as the long flag
/// names with '_' for '-': listen, threads, storage, tokens, anonymous_read,
/// tls_cert, tls_key, max_body, ...). Unknown keys are errors.
Status load_server_config_file(const std::filesystem::path& path, ServerConfig& config);

/// Checks the combination (storage set, TLS cert and key together,
/// require_signature only with trusted keys, ranges).
Status validate_server_config(const ServerConfig& config);

}  // namespace opcache::server
