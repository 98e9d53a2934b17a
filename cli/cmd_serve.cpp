// opcache serve: the team cache server.
#include <iostream>

#include "cli/context.hpp"
#include "server/serve.hpp"

namespace opcache::cli {

namespace {

namespace server = opcache::server;

// Flags as given; each one set overrides the config file.
struct ServeArgs {
  std::vector<std::string> listen;
  std::optional<int> threads;
  std::optional<int> workers;
  std::optional<std::string> storage;
  std::optional<std::string> tokens;
  bool anonymous_read = false;
  std::optional<std::string> tls_cert;
  std::optional<std::string> tls_key;
  std::optional<std::uint64_t> max_body;
  std::optional<int> request_timeout;
  std::optional<int> idle_timeout;
  std::optional<int> max_inflight;
  std::optional<int> lease_ttl;
  std::optional<int> max_wait;
  std::optional<std::string> log_format;
  std::optional<std::string> access_log;
  std::optional<std::string> port_file;
  std::optional<std::string> trusted_keys;
  bool require_signature = false;
  bool hash_token = false;
  std::string token_name = "NAME";
  std::string token_scopes = "read";
};

Status apply_flags(const ServeArgs& args, server::ServerConfig& config) {
  if (!args.listen.empty()) {
    config.listen.clear();
    for (const auto& text : args.listen) {
      auto address = server::parse_listen_address(text);
      if (!address) {
        return address.error();
      }
      config.listen.push_back(*address);
    }
  }
  auto set = [](auto& target, const auto& value) {
    if (value) {
      target = *value;
    }
  };
  set(config.threads, args.threads);
  set(config.workers, args.workers);
  set(config.storage, args.storage);
  if (args.tokens) {
    config.tokens_file = *args.tokens;
  }
  config.anonymous_read = config.anonymous_read || args.anonymous_read;
  if (args.tls_cert) {
    config.tls_cert = *args.tls_cert;
  }
  if (args.tls_key) {
    config.tls_key = *args.tls_key;
  }
  set(config.max_body_bytes, args.max_body);
  set(config.request_timeout_s, args.request_timeout);
  set(config.idle_timeout_s, args.idle_timeout);
  set(config.max_inflight, args.max_inflight);
  set(config.lease_ttl_s, args.lease_ttl);
  set(config.max_wait_s, args.max_wait);
  if (args.log_format) {
    config.log_format = *args.log_format == "json" ? server::LogFormat::json : server::LogFormat::text;
  }
  if (args.access_log) {
    config.access_log = *args.access_log;
  }
  if (args.port_file) {
    config.port_file = *args.port_file;
  }
  if (args.trusted_keys) {
    config.trusted_keys_file = *args.trusted_keys;
  }
  config.require_signature = config.require_signature || args.require_signature;
  return server::validate_server_config(config);
}

int run_hash_token(const Context& context, const ServeArgs& args) {
  std::string token;
  std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  auto line = server::token_file_line(token, args.token_name, args.token_scopes);
  if (!line) {
    return context.fail(line.error());
  }
  std::cout << *line << '\n';
  return k_exit_ok;
}

int run_serve(const Context& context, const ServeArgs& args) {
  if (args.hash_token) {
    return run_hash_token(context, args);
  }
  server::ServerConfig config;
  if (const auto config_file = context.options.store_config().config_file; !config_file.empty()) {
    if (auto loaded = server::load_server_config_file(config_file, config); !loaded) {
      return context.fail(loaded.error());
    }
  }
  if (auto applied = apply_flags(args, config); !applied) {
    return context.fail(applied.error());
  }
  auto warn = [&context](const std::string& message) { context.note("warning: " + message); };
  if (auto served = server::run_server(config, warn); !served) {
    return context.fail(served.error());
  }
  return k_exit_ok;
}

}  // namespace

std::vector<Command> register_serve_command(CLI::App& app, Context& context) {
  auto args = std::make_shared<ServeArgs>();
  auto* command = app.add_subcommand("serve", "Run the team cache server (HTTP API v1, docs/protocol.md)");
  command->footer(
      "Settings come from flags, else the [serve] section of the --config file, else defaults.\n"
      "SIGTERM/SIGINT finish requests in flight and stop; SIGHUP reloads --tokens, --trusted-keys and the TLS certificate.\n\n"
      "Examples:\n"
      "  opcache serve --storage /srv/opcache --listen 0.0.0.0:8080 --tokens /etc/opcache/tokens\n"
      "  opcache serve --storage 's3://kernels/team?endpoint=https://minio.local:9000' --tls-cert c.pem --tls-key k.pem\n"
      "  echo \"$TOKEN\" | opcache serve --hash-token --token-name ci --token-scopes write   # a tokens-file line");
  command->add_option("--listen,-l", args->listen, "Address to listen on, HOST:PORT (repeatable; default 127.0.0.1:8080)");
  command->add_option("--storage", args->storage, "A local directory, or s3://BUCKET/PREFIX?endpoint=URL&region=R");
  command->add_option("--threads", args->threads, "I/O threads (default 2)")->check(CLI::Range(1, 256));
  command->add_option("--workers", args->workers, "Threads for storage work (default 4)")->check(CLI::Range(1, 1024));
  command->add_option("--tokens", args->tokens, "Tokens file: '<sha256 of token> <name> <scope>[,<scope>]' per line");
  command->add_flag("--anonymous-read", args->anonymous_read, "Allow reads without a token");
  command->add_option("--tls-cert", args->tls_cert, "PEM certificate chain (enables TLS, with --tls-key)");
  command->add_option("--tls-key", args->tls_key, "PEM private key");
  command->add_option("--max-body", args->max_body, "Largest accepted upload in bytes (default 536870912)");
  command->add_option("--request-timeout", args->request_timeout, "Seconds a request may take to arrive (default 120)")
      ->check(CLI::Range(1, 86400));
  command->add_option("--idle-timeout", args->idle_timeout, "Seconds an idle keep-alive connection stays open (default 30)")
      ->check(CLI::Range(1, 86400));
  command->add_option("--max-inflight", args->max_inflight, "Storage operations in progress before 429 (default 256)")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("--lease-ttl", args->lease_ttl,
                      "Seconds a build lease lasts unless its holder renews it (default 60; docs/protocol.md)")
      ->check(CLI::Range(1, 3600));
  command->add_option("--max-wait", args->max_wait,
                      "Longest GET/HEAD ?wait=SECONDS held open for an entry being built (default 60)")
      ->check(CLI::Range(0, 3600));
  command->add_option("--log-format", args->log_format, "Access log format: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  command->add_option("--access-log", args->access_log, "Access log file (default: standard error)");
  command->add_option("--port-file", args->port_file, "Write the bound addresses here once listening");
  command->add_option("--trusted-keys", args->trusted_keys,
                      "Trusted signers' public keys, NAME:BASE64 per line (reloaded on SIGHUP)");
  command->add_flag("--require-signature", args->require_signature,
                    "Refuse uploads without a valid signature by a trusted key (needs --trusted-keys)");
  command->add_flag("--hash-token", args->hash_token,
                    "Print a tokens-file line for the token read from standard input, and exit");
  command->add_option("--token-name", args->token_name, "Name for --hash-token (shown in the access log)");
  command->add_option("--token-scopes", args->token_scopes, "Scopes for --hash-token: read, write, admin");
  return {{command, [&context, args] { return run_serve(context, *args); }}};
}

}  // namespace opcache::cli
