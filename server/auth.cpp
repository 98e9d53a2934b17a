#include "server/auth.hpp"

#include <openssl/crypto.h>

#include <sstream>

#include "base/file_io.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

Result<Scope> parse_scopes(const std::string& text, const std::string& where) {
  Scope highest = Scope::none;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    Scope scope = item == "read" ? Scope::read : item == "write" ? Scope::write : item == "admin" ? Scope::admin
                                                                                                 : Scope::none;
    if (scope == Scope::none) {
      return Error::usage(where + ": unknown scope \"" + item + "\" (allowed: read, write, admin)");
    }
    highest = std::max(highest, scope);
  }
  if (highest == Scope::none) {
    return Error::usage(where + ": no scope given (allowed: read, write, admin)");
  }
  return highest;
}

bool parse_hex_hash(const std::string& text, std::array<std::uint8_t, 32>& out) {
  if (!base::is_sha256_hex(text)) {
    return false;
  }
  auto nibble = [](char c) { return static_cast<std::uint8_t>(c <= '9' ? c - '0' : c - 'a' + 10); };
  for (std::size_t i = 0; i < 32; ++i) {
    out[i] = static_cast<std::uint8_t>(nibble(text[2 * i]) << 4 | nibble(text[2 * i + 1]));
  }
  return true;
}

}  // namespace

const char* to_string(Scope scope) noexcept {
  switch (scope) {
    case Scope::read: return "read";
    case Scope::write: return "write";
    case Scope::admin: return "admin";
    case Scope::none: break;
  }
  return "none";
}

std::string hash_token(std::string_view token) { return base::sha256_hex(token); }

Result<TokenTable> TokenTable::load(const std::filesystem::path& path) {
  OPCACHE_TRY_ASSIGN(std::string text, base::read_file(path));
  return parse(text, path.string());
}

Result<TokenTable> TokenTable::parse(std::string_view text, const std::string& origin) {
  TokenTable table;
  std::stringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (auto hash = line.find('#'); hash != std::string::npos) {
      line.erase(hash);
    }
    std::stringstream fields(line);
    std::string hex, name, scopes, extra;
    if (!(fields >> hex)) {
      continue;  // blank or comment
    }
    const std::string where = origin + ":" + std::to_string(number);
    if (!(fields >> name >> scopes) || (fields >> extra)) {
      return Error::usage(where + ": expected \"<sha256 hex of the token> <name> <scope>[,<scope>...]\"");
    }
    Entry entry;
    if (!parse_hex_hash(hex, entry.hash)) {
      return Error::usage(where + ": the first field must be 64 lowercase hex digits (the SHA-256 of the token; "
                                  "`opcache serve --hash-token` prints it), not the token itself");
    }
    entry.name = name;
    OPCACHE_TRY_ASSIGN(entry.scope, parse_scopes(scopes, where));
    table.m_entries.push_back(std::move(entry));
  }
  return table;
}

AuthDecision TokenTable::authorize(std::string_view authorization, Scope required, bool anonymous_read) const {
  AuthDecision decision;
  if (required == Scope::none) {
    return decision;
  }
  if (authorization.empty()) {
    if (anonymous_read && required == Scope::read) {
      return decision;
    }
    decision.status = 401;
    decision.message = std::string("this request needs a bearer token with the ") + to_string(required) + " scope";
    return decision;
  }
  constexpr std::string_view k_prefix = "Bearer ";
  if (authorization.size() <= k_prefix.size() || authorization.substr(0, k_prefix.size()) != k_prefix) {
    decision.status = 401;
    decision.message = "the Authorization header must be \"Bearer <token>\"";
    return decision;
  }
  base::Sha256 hasher;
  hasher.update(authorization.substr(k_prefix.size()));
  const auto presented = hasher.finish();
  // Look at every entry, whatever matches, so timing says nothing about the table.
  const Entry* match = nullptr;
  for (const auto& entry : m_entries) {
    if (CRYPTO_memcmp(entry.hash.data(), presented.data(), presented.size()) == 0) {
      match = &entry;
    }
  }
  if (match == nullptr) {
    decision.status = 401;
    decision.message = "unknown token";
    return decision;
  }
  decision.identity = Identity{match->name, match->scope};
  if (match->scope < required) {
    decision.status = 403;
    decision.message = "token \"" + match->name + "\" has the " + to_string(match->scope) + " scope; this request needs " +
                       to_string(required);
  }
  return decision;
}

}  // namespace opcache::server
