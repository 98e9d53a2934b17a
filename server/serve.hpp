// The entry point of `opcache serve`: everything the CLI needs from the
// server. The CLI parses flags into a ServerConfig (server_config.hpp) and
// calls run_server; nothing else of server/ is visible to it.
#pragma once

#include <functional>
#include <string>

#include "opcache/result.hpp"
#include "server/server_config.hpp"

namespace opcache::server {

/// Receives warnings meant for the operator (one line each, without a prefix).
using WarningSink = std::function<void(const std::string& message)>;

/// Runs the team server with `config` (already validated): loads the tokens
/// file, opens the storage, binds every listen address, writes
/// `config.port_file` once listening, and serves until SIGTERM or SIGINT
/// (SIGHUP reloads tokens and the TLS certificate). Ignores SIGPIPE for the
/// process. Returns an error only when start-up fails (tokens file named as
/// "--tokens: …", storage, binding, the port file); `warn` receives the
/// warnings (no tokens and no anonymous reads, storage settings). Blocks the
/// calling thread; call once per process.
Status run_server(const ServerConfig& config, const WarningSink& warn);

/// The tokens-file line for `token` ("<sha256 of token> <name> <scopes>"),
/// checked by the tokens-file parser. `usage` error for an empty token or a
/// bad name or scope list. Pure; thread-safe.
Result<std::string> token_file_line(const std::string& token, const std::string& name, const std::string& scopes);

}  // namespace opcache::server
