// Bearer-token access control for `opcache serve`. The tokens file holds one
// token per line as "<sha256 hex of the token> <name> <scope>[,<scope>…]";
// '#' starts a comment. Scopes are ordered: admin ⊃ write ⊃ read. Tokens are
// compared in constant time and never logged; only their names are.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::server {

/// What a request needs. Ordered: a higher scope includes the lower ones.
enum class Scope : int { none = 0, read = 1, write = 2, admin = 3 };

const char* to_string(Scope scope) noexcept;

/// Who made a request (the token's name, or "-" when anonymous).
struct Identity {
  std::string name = "-";
  Scope scope = Scope::none;
};

/// The result of checking a request's Authorization header.
struct AuthDecision {
  int status = 200;  ///< 200 allowed, 401 no/unknown token, 403 token lacks the scope
  Identity identity;
  std::string message;  ///< for 401/403: what is missing (never the token)
};

/// The tokens known to a server. Immutable; safe to share between threads.
class TokenTable {
 public:
  TokenTable() = default;

  /// Parses a tokens file. Errors (`usage`) name the file and line.
  static Result<TokenTable> load(const std::filesystem::path& path);
  /// Parses tokens-file text; `origin` names it in errors.
  static Result<TokenTable> parse(std::string_view text, const std::string& origin);

  /// Checks `authorization` ("Bearer <token>", or empty) against `required`.
  /// Without a token, `anonymous_read` allows read-scope routes.
  AuthDecision authorize(std::string_view authorization, Scope required, bool anonymous_read) const;

  std::size_t size() const noexcept { return m_entries.size(); }

 private:
  struct Entry {
    std::array<std::uint8_t, 32> hash;
    std::string name;
    Scope scope;
  };
  std::vector<Entry> m_entries;
};

/// The lowercase hex SHA-256 of a token, as the tokens file stores it.
std::string hash_token(std::string_view token);

}  // namespace opcache::server
