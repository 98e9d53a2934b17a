// Bearer tokens for the `opcache serve --tokens FILE` servers the tests start,
// and the lines of that file.
#pragma once

#include <string>

namespace opcache::test {

/// Tokens the tests hand to the clients of a test server. Any text would do
/// (a tokens file holds only their SHA-256); each name says the scope the
/// tests grant that token in the tokens file they write: read; write (often
/// together with read); admin. Distinct from each other.
inline constexpr const char* k_read_token = "test-read-token-7f3a9c1d2e";
inline constexpr const char* k_write_token = "test-write-token-4b8e6a0f91";
inline constexpr const char* k_admin_token = "test-admin-token-c52d7e3b08";

/// One line of a tokens file, newline included: "<SHA-256 of token, hex>
/// <name> <scopes>\n", `scopes` comma-separated ("read", "read,write",
/// "admin"…).
std::string token_line(const std::string& token, const std::string& name, const std::string& scopes);

}  // namespace opcache::test
