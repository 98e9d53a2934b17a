#include "server/server_config.hpp"

#include <cstdlib>
#include <map>

#include "base/file_io.hpp"
#include "base/ini.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

Result<std::int64_t> parse_number(const std::string& where, const std::string& text, std::int64_t min,
                                  std::int64_t max) {
  char* end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || value < min || value > max) {
    return Error::usage(where + " = \"" + text + "\" must be an integer from " + std::to_string(min) + " to " +
                        std::to_string(max));
  }
  return value;
}

Result<bool> parse_bool(const std::string& where, const std::string& text) {
  if (text == "true" || text == "yes" || text == "1" || text == "on") {
    return true;
  }
  if (text == "false" || text == "no" || text == "0" || text == "off") {
    return false;
  }
  return Error::usage(where + " = \"" + text + "\" must be true or false");
}

Status apply(ServerConfig& config, const std::string& where, const std::string& key, const std::string& value) {
  const std::string at = where + " " + key;
  if (key == "listen") {
    config.listen.clear();
    std::size_t start = 0;
    while (start <= value.size()) {
      auto end = value.find(',', start);
      OPCACHE_TRY_ASSIGN(auto address, parse_listen_address(value.substr(start, end == std::string::npos
                                                                                    ? std::string::npos
                                                                                    : end - start)));
      config.listen.push_back(address);
      if (end == std::string::npos) {
        break;
      }
      start = end + 1;
    }
  } else if (key == "threads") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 256));
    config.threads = static_cast<int>(n);
  } else if (key == "workers") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 1024));
    config.workers = static_cast<int>(n);
  } else if (key == "storage") {
    config.storage = value;
  } else if (key == "tokens") {
    config.tokens_file = value;
  } else if (key == "anonymous_read") {
    OPCACHE_TRY_ASSIGN(config.anonymous_read, parse_bool(at, value));
  } else if (key == "tls_cert") {
    config.tls_cert = value;
  } else if (key == "tls_key") {
    config.tls_key = value;
  } else if (key == "max_body") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1024, 1ll << 40));
    config.max_body_bytes = static_cast<std::uint64_t>(n);
  } else if (key == "max_header") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1024, 1 << 20));
    config.max_header_bytes = static_cast<std::uint32_t>(n);
  } else if (key == "lease_ttl") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 3600));
    config.lease_ttl_s = static_cast<int>(n);
  } else if (key == "max_wait") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 0, 3600));
    config.max_wait_s = static_cast<int>(n);
  } else if (key == "request_timeout") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 86400));
    config.request_timeout_s = static_cast<int>(n);
  } else if (key == "idle_timeout") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 86400));
    config.idle_timeout_s = static_cast<int>(n);
  } else if (key == "max_inflight") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 1, 1 << 20));
    config.max_inflight = static_cast<int>(n);
  } else if (key == "bundle_cache") {
    OPCACHE_TRY_ASSIGN(auto n, parse_number(at, value, 0, 1ll << 40));
    config.bundle_cache_bytes = static_cast<std::size_t>(n);
  } else if (key == "log_format") {
    if (value != "text" && value != "json") {
      return Error::usage(at + " = \"" + value + "\" must be text or json");
    }
    config.log_format = value == "json" ? LogFormat::json : LogFormat::text;
  } else if (key == "access_log") {
    config.access_log = value;
  } else if (key == "temp_dir") {
    config.temp_dir = value;
  } else if (key == "trusted_keys") {
    config.trusted_keys_file = value;
  } else if (key == "require_signature") {
    OPCACHE_TRY_ASSIGN(config.require_signature, parse_bool(at, value));
  } else {
    return Error::usage(at + " is not a known setting (see docs/operations.md)");
  }
  return {};
}

}  // namespace

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
  auto port = parse_number("listen address \"" + text + "\" port", text.substr(colon + 1), 0, 65535);
  if (!port) {
    return port.error();
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
    OPCACHE_TRY(apply(config, where + ": [serve]", entry.name, entry.value));
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
  return {};
}

}  // namespace opcache::server
