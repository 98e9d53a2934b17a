#include "server/serve.hpp"

#include <csignal>

#include "base/environment.hpp"
#include "base/file_io.hpp"
#include "base/try.hpp"
#include "server/auth.hpp"
#include "server/http_server.hpp"
#include "server/storage_factory.hpp"

namespace opcache::server {

namespace {

Result<TokenTable> load_tokens(const ServerConfig& config, const WarningSink& warn) {
  if (config.tokens_file.empty()) {
    if (!config.anonymous_read) {
      warn("no --tokens and no --anonymous-read: every request except /healthz will be refused");
    }
    return TokenTable();
  }
  auto loaded = TokenTable::load(config.tokens_file);
  if (!loaded) {
    return loaded.error().with_context("--tokens");
  }
  return loaded;
}

Status write_port_file(const std::filesystem::path& path, const std::vector<std::string>& bound) {
  std::string lines;
  for (const auto& address : bound) {
    lines += address + "\n";
  }
  return base::write_file_atomic(path, lines);
}

}  // namespace

Status run_server(const ServerConfig& config, const WarningSink& warn) {
  OPCACHE_TRY_ASSIGN(auto tokens, load_tokens(config, warn));
  OPCACHE_TRY_ASSIGN(auto storage, open_storage(config, base::process_environment(), warn));
  std::signal(SIGPIPE, SIG_IGN);
  HttpServer http(config, std::move(storage), std::move(tokens));
  OPCACHE_TRY_ASSIGN(auto bound, http.start());
  if (!config.port_file.empty()) {
    OPCACHE_TRY(write_port_file(config.port_file, bound));
  }
  http.run();
  return {};
}

Result<std::string> token_file_line(const std::string& token, const std::string& name, const std::string& scopes) {
  if (token.empty()) {
    return Error::usage("--hash-token reads the token from standard input; got an empty line");
  }
  std::string line = hash_token(token) + " " + name + " " + scopes;
  OPCACHE_TRY(TokenTable::parse(line, "--hash-token"));
  return line;
}

}  // namespace opcache::server
