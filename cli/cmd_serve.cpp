// opcache serve: the team cache server, in the opcache-serve program
// (cli/serve_main.cpp; `opcache serve` runs it).
#include <iostream>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "base/environment.hpp"
#include "base/try.hpp"
#include "cli/context.hpp"
#include "server/serve.hpp"

namespace opcache::cli {

namespace {

namespace server = opcache::server;

// Flags as given, by [serve] key: every occurrence's value in order
// ("true"/"false" for a boolean's two forms). The --hash-token options are
// not settings.
struct ServeArgs {
  std::map<std::string, std::vector<std::string>> settings;
  bool hash_token = false;
  std::string token_name = "NAME";
  std::string token_scopes = "read";
};

// Applies the flags given over `config` (already holding the file's and the
// environment's values), then checks the combination.
Status apply_flags(const ServeArgs& args, server::ServerConfig& config) {
  for (const auto& row : server::serve_settings()) {
    auto given = args.settings.find(std::string(row.key));
    if (given == args.settings.end() || given->second.empty()) {
      continue;
    }
    const auto& values = given->second;
    std::string text = values.back();
    if (std::holds_alternative<std::vector<server::ListenAddress> server::ServerConfig::*>(row.field)) {
      text.clear();
      for (const auto& value : values) {
        text += (text.empty() ? "" : ",") + value;
      }
    }
    OPCACHE_TRY(server::apply_serve_setting(config, row, server::primary_flag(row), text));
  }
  return server::validate_server_config(config);
}

// Adds one row's flags: an option taking a value, or for a boolean a flag
// and its --no- form.
void add_setting(CLI::App& command, const server::ServeSetting& row, std::vector<std::string>& values) {
  const std::string flag(row.flag);
  const std::string help = server::serve_help(row);
  if (!server::is_boolean(row)) {
    command.add_option(flag, values, help)->allow_extra_args(false)->type_name(std::string(row.value_name));
    return;
  }
  auto* on = command.add_flag_callback(
      flag, [&values] { values.push_back("true"); }, help);
  auto* off = command.add_flag_callback(
      "--no-" + flag.substr(2), [&values] { values.push_back("false"); },
      "Turn " + flag + " off, whatever the environment and the file say");
  on->excludes(off);
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
  // Precedence, lowest first: defaults, the [serve] section, the environment, flags.
  server::ServerConfig config;
  if (const auto config_file = context.options.store_config().config_file; !config_file.empty()) {
    if (auto loaded = server::load_server_config_file(config_file, config); !loaded) {
      return context.fail(loaded.error());
    }
  }
  if (auto loaded = server::load_server_environment(base::process_environment(), config); !loaded) {
    return context.fail(loaded.error());
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
  auto* command = app.add_subcommand("serve", k_serve_summary);
  command->footer(
      "Settings come from flags, else OPCACHE_SERVE_* environment variables, else the [serve] section of the\n"
      "--config file, else defaults (docs/operations.md). Booleans take true/false, 1/0, on/off, yes/no.\n"
      "SIGTERM/SIGINT finish requests in flight and stop; SIGHUP reloads --tokens, --trusted-keys and the TLS "
      "certificate.\n\n"
      "Examples:\n"
      "  opcache serve --storage /srv/opcache --listen 0.0.0.0:8080 --tokens /etc/opcache/tokens\n"
      "  opcache serve --storage 's3://kernels/team?endpoint=https://minio.local:9000' --tls-cert c.pem --tls-key "
      "k.pem\n"
      "  echo \"$TOKEN\" | opcache serve --hash-token --token-name ci --token-scopes write   # a tokens-file line");
  for (const auto& row : server::serve_settings()) {
    add_setting(*command, row, args->settings[std::string(row.key)]);
  }
  command->add_flag("--hash-token", args->hash_token,
                    "Print a tokens-file line for the token read from standard input, and exit");
  command->add_option("--token-name", args->token_name, "Name for --hash-token (shown in the access log)");
  command->add_option("--token-scopes", args->token_scopes, "Scopes for --hash-token: read, write, admin");
  return {{command, [&context, args] { return run_serve(context, *args); }}};
}

}  // namespace opcache::cli
