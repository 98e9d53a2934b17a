#include "server/server_config.hpp"

#include "base/file_io.hpp"
#include "base/ini.hpp"
#include "base/try.hpp"
#include "base/value_parse.hpp"
#include "server/team_usage.hpp"

namespace opcache::server {

namespace {

constexpr std::int64_t k_terabyte = 1ll << 40;

// The table. Ranges and help are written only here; flags, INI keys,
// environment variables and the help text all come from these rows.
const ServeSetting k_rows[] = {
    {"--listen,-l", "listen", "OPCACHE_SERVE_LISTEN", &ServerConfig::listen, 0, 0, "HOST:PORT",
     "Address to listen on: HOST:PORT, [IPv6]:PORT or :PORT (repeatable; a comma list in the file and environment)",
     ""},
    {"--storage", "storage", "OPCACHE_SERVE_STORAGE", &ServerConfig::storage, 0, 0, "DIR|URL",
     "A local directory, or s3://BUCKET/PREFIX?endpoint=URL&region=R", "required"},
    {"--threads", "threads", "OPCACHE_SERVE_THREADS", &ServerConfig::threads, 1, 256, "N", "I/O threads", ""},
    {"--workers", "workers", "OPCACHE_SERVE_WORKERS", &ServerConfig::workers, 1, 1024, "N",
     "Threads for storage work (disk, verification, S3)", ""},
    {"--tokens", "tokens", "OPCACHE_SERVE_TOKENS", &ServerConfig::tokens_file, 0, 0, "FILE",
     "Tokens file: '<sha256 of token> <name> <scope>[,<scope>]' per line", ""},
    {"--anonymous-read", "anonymous_read", "OPCACHE_SERVE_ANONYMOUS_READ", &ServerConfig::anonymous_read, 0, 0, "",
     "Allow reads without a token", ""},
    {"--trusted-keys", "trusted_keys", "OPCACHE_SERVE_TRUSTED_KEYS", &ServerConfig::trusted_keys_file, 0, 0, "FILE",
     "Trusted signers' public keys, NAME:BASE64 per line (reloaded on SIGHUP)", ""},
    {"--require-signature", "require_signature", "OPCACHE_SERVE_REQUIRE_SIGNATURE", &ServerConfig::require_signature, 0,
     0, "", "Refuse uploads without a valid signature by a trusted key (needs --trusted-keys)", ""},
    {"--tls-cert", "tls_cert", "OPCACHE_SERVE_TLS_CERT", &ServerConfig::tls_cert, 0, 0, "FILE",
     "PEM certificate chain (enables TLS, with --tls-key)", "no TLS"},
    {"--tls-key", "tls_key", "OPCACHE_SERVE_TLS_KEY", &ServerConfig::tls_key, 0, 0, "FILE", "PEM private key", ""},
    {"--max-body", "max_body", "OPCACHE_SERVE_MAX_BODY", &ServerConfig::max_body_bytes, 1024, k_terabyte, "BYTES",
     "Largest accepted upload (413 above)", ""},
    {"--max-header", "max_header", "OPCACHE_SERVE_MAX_HEADER", &ServerConfig::max_header_bytes, 1024, 1 << 20, "BYTES",
     "Largest request header block (431 above)", ""},
    {"--request-timeout", "request_timeout", "OPCACHE_SERVE_REQUEST_TIMEOUT", &ServerConfig::request_timeout_s, 1,
     86400, "S", "Seconds within which a request must arrive and be answered", ""},
    {"--idle-timeout", "idle_timeout", "OPCACHE_SERVE_IDLE_TIMEOUT", &ServerConfig::idle_timeout_s, 1, 86400, "S",
     "Seconds an idle keep-alive connection stays open", ""},
    {"--lease-ttl", "lease_ttl", "OPCACHE_SERVE_LEASE_TTL", &ServerConfig::lease_ttl_s, 1, 3600, "S",
     "Seconds a build lease lasts unless its holder renews it (docs/protocol.md)", ""},
    {"--max-wait", "max_wait", "OPCACHE_SERVE_MAX_WAIT", &ServerConfig::max_wait_s, 0, 3600, "S",
     "Longest GET/HEAD ?wait=SECONDS held open for an entry being built (0: no waiting)", ""},
    {"--replica", "replica", "OPCACHE_SERVE_REPLICA", &ServerConfig::replica, 0, 0, "NAME",
     "This replica's name among the servers over one s3:// storage (its usage counters' object, the /metrics "
     "label)",
     "the host name and the first listening port"},
    {"--stats-interval", "stats_interval", "OPCACHE_SERVE_STATS_INTERVAL", &ServerConfig::stats_interval_s, 1, 3600,
     "S", "Seconds between writes of this replica's usage counters to an s3:// storage (a restart loses at most one)",
     ""},
    {"--redirect-downloads", "redirect_downloads", "OPCACHE_SERVE_REDIRECT_DOWNLOADS",
     &ServerConfig::redirect_downloads, 0, 0, "",
     "Answer a GET of a bundle in an s3:// storage with 307 to a presigned URL of its object", ""},
    {"--redirect-expiry", "redirect_expiry", "OPCACHE_SERVE_REDIRECT_EXPIRY", &ServerConfig::redirect_expiry_s, 1,
     604800, "S", "Seconds a presigned download URL stays valid", ""},
    {"--max-inflight", "max_inflight", "OPCACHE_SERVE_MAX_INFLIGHT", &ServerConfig::max_inflight, 1, 1 << 20, "N",
     "Storage operations in progress before 429", ""},
    {"--bundle-cache", "bundle_cache", "OPCACHE_SERVE_BUNDLE_CACHE", &ServerConfig::bundle_cache_bytes, 0, k_terabyte,
     "BYTES", "Bytes of small bundles of a local store kept in memory (0: none)", ""},
    {"--log-format", "log_format", "OPCACHE_SERVE_LOG_FORMAT", &ServerConfig::log_format, 0, 0, "text|json",
     "Access log format", ""},
    {"--access-log", "access_log", "OPCACHE_SERVE_ACCESS_LOG", &ServerConfig::access_log, 0, 0, "FILE",
     "Access log file ('-': standard error; 'off': no request lines, events to standard error)", "standard error"},
    {"--access-log-flush", "access_log_flush", "OPCACHE_SERVE_ACCESS_LOG_FLUSH", &ServerConfig::access_log_flush_ms, 0,
     60000, "MS",
     "Milliseconds access-log lines may wait in memory to be written together (0: each at once; events always are)",
     ""},
    {"--port-file", "port_file", "OPCACHE_SERVE_PORT_FILE", &ServerConfig::port_file, 0, 0, "FILE",
     "Write the bound addresses here once listening", ""},
    {"--temp-dir", "temp_dir", "OPCACHE_SERVE_TEMP_DIR", &ServerConfig::temp_dir, 0, 0, "DIR",
     "Uploads to S3 are spooled here", "the system's temporary directory"},
};

Result<std::vector<ListenAddress>> parse_listen_list(const std::string& text) {
  std::vector<ListenAddress> addresses;
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = text.find(',', start);
    OPCACHE_TRY_ASSIGN(auto address, parse_listen_address(text.substr(
                                         start, end == std::string::npos ? std::string::npos : end - start)));
    addresses.push_back(address);
    if (end == std::string::npos) {
      break;
    }
    start = end + 1;
  }
  return addresses;
}

// Parses text into one ServerConfig field by the field's type.
struct AssignText {
  template <typename Integer>
  Status operator()(Integer ServerConfig::*field) const {
    auto value = base::parse_integer(text, row.min, row.max);
    if (!value) {
      return base::value_error(where, text, value.error());
    }
    config.*field = static_cast<Integer>(*value);
    return {};
  }
  Status operator()(bool ServerConfig::*field) const {
    auto value = base::parse_bool(text);
    if (!value) {
      return base::value_error(where, text, value.error());
    }
    config.*field = *value;
    return {};
  }
  Status operator()(std::string ServerConfig::*field) const {
    config.*field = text;
    return {};
  }
  Status operator()(std::filesystem::path ServerConfig::*field) const {
    config.*field = text;
    return {};
  }
  Status operator()(std::vector<ListenAddress> ServerConfig::*field) const {
    auto addresses = parse_listen_list(text);
    if (!addresses) {
      return addresses.error().with_context(where);
    }
    config.*field = std::move(*addresses);
    return {};
  }
  Status operator()(LogFormat ServerConfig::*field) const {
    if (text != "text" && text != "json") {
      return Error::usage(where + " \"" + text + "\" must be text or json");
    }
    config.*field = text == "json" ? LogFormat::json : LogFormat::text;
    return {};
  }

  ServerConfig& config;
  const ServeSetting& row;
  const std::string& where;
  const std::string& text;
};

// The default of one field as text.
struct DefaultText {
  template <typename Integer>
  std::string operator()(Integer ServerConfig::*field) const {
    return std::to_string(defaults.*field);
  }
  std::string operator()(bool ServerConfig::*field) const { return defaults.*field ? "true" : "false"; }
  std::string operator()(std::string ServerConfig::*field) const { return or_unset(defaults.*field); }
  std::string operator()(std::filesystem::path ServerConfig::*field) const {
    return or_unset((defaults.*field).string());
  }
  std::string operator()(std::vector<ListenAddress> ServerConfig::*field) const {
    std::string text;
    for (const auto& address : defaults.*field) {
      text += (text.empty() ? "" : ",") + address.host + ":" + std::to_string(address.port);
    }
    return text;
  }
  std::string operator()(LogFormat ServerConfig::*field) const {
    return defaults.*field == LogFormat::json ? "json" : "text";
  }
  std::string or_unset(const std::string& text) const {
    return !text.empty() ? text : row.when_unset.empty() ? "none" : std::string(row.when_unset);
  }

  const ServerConfig& defaults;
  const ServeSetting& row;
};

const ServeSetting* row_of_key(const std::string& key) {
  for (const auto& row : k_rows) {
    if (row.key == key) {
      return &row;
    }
  }
  return nullptr;
}

}  // namespace

std::span<const ServeSetting> serve_settings() noexcept {
  return k_rows;
}

bool is_boolean(const ServeSetting& row) noexcept {
  return std::holds_alternative<bool ServerConfig::*>(row.field);
}

std::string primary_flag(const ServeSetting& row) {
  return std::string(row.flag.substr(0, row.flag.find(',')));
}

std::string default_text(const ServeSetting& row) {
  const ServerConfig defaults;
  return std::visit(DefaultText{defaults, row}, row.field);
}

std::string serve_help(const ServeSetting& row) {
  std::string help(row.help);
  help += " (";
  if (row.min != 0 || row.max != 0) {
    help += std::to_string(row.min) + ".." + std::to_string(row.max) + "; ";
  }
  help += "default " + default_text(row) + "; [serve] " + std::string(row.key) + "; " + std::string(row.env) + ")";
  return help;
}

Status apply_serve_setting(ServerConfig& config, const ServeSetting& row, const std::string& where,
                           const std::string& text) {
  return std::visit(AssignText{config, row, where, text}, row.field);
}

Status load_server_environment(const base::EnvLookup& env, ServerConfig& config) {
  for (const auto& row : k_rows) {
    const std::string name(row.env);
    if (auto value = env(name.c_str()); value && !value->empty()) {
      OPCACHE_TRY(apply_serve_setting(config, row, "environment variable " + name, *value));
    }
  }
  return {};
}

Result<ListenAddress> parse_listen_address(const std::string& text) {
  auto colon = text.rfind(':');
  if (colon == std::string::npos) {
    return Error::usage("listen address \"" + text + "\" must be HOST:PORT, [IPv6]:PORT or :PORT");
  }
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    host = "0.0.0.0";
  }
  const std::string port_text = text.substr(colon + 1);
  auto port = base::parse_integer(port_text, 0, 65535);
  if (!port) {
    return base::value_error("listen address \"" + text + "\" port", port_text, port.error());
  }
  return ListenAddress{host, static_cast<std::uint16_t>(*port)};
}

Status load_server_config_file(const std::filesystem::path& path, ServerConfig& config) {
  OPCACHE_TRY_ASSIGN(std::string text, base::read_file(path));
  const std::string where = path.string();
  OPCACHE_TRY_ASSIGN(auto entries, base::parse_ini(text, where));
  for (const auto& entry : entries) {
    if (entry.section != "serve") {
      return Error::usage(where + ": unknown section [" + entry.section + "] (use [serve])");
    }
    const ServeSetting* row = row_of_key(entry.name);
    if (row == nullptr) {
      return Error::usage(where + ": [serve] " + entry.name + " is not a known setting (see docs/operations.md)");
    }
    OPCACHE_TRY(apply_serve_setting(config, *row, where + ": [serve] " + entry.name, entry.value));
  }
  return {};
}

Status validate_server_config(const ServerConfig& config) {
  if (config.storage.empty()) {
    return Error::usage("no storage: pass --storage DIR or --storage s3://BUCKET/PREFIX?endpoint=...");
  }
  if (config.listen.empty()) {
    return Error::usage("no listen address: pass --listen HOST:PORT");
  }
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return Error::usage("TLS needs both --tls-cert and --tls-key");
  }
  if (config.require_signature && config.trusted_keys_file.empty()) {
    return Error::usage("--require-signature needs --trusted-keys FILE (the keys whose signatures are accepted)");
  }
  if (auto problem = config.replica.empty() ? std::nullopt : replica_name_problem(config.replica)) {
    return Error::usage("--replica (replica, OPCACHE_SERVE_REPLICA) " + *problem);
  }
  return {};
}

}  // namespace opcache::server
