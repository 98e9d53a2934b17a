// Bearer-token access control (server/auth.cpp).
#include <doctest/doctest.h>

#include <string>

#include "server/auth.hpp"

using namespace opcache::server;

namespace {

std::string line(const std::string& token, const std::string& name, const std::string& scopes) {
  return hash_token(token) + " " + name + " " + scopes + "\n";
}

std::string bearer(const std::string& token) { return "Bearer " + token; }

}  // namespace

TEST_CASE("server::TokenTable parses lines, comments and blank lines") {
  auto table = TokenTable::parse("# tokens\n\n" + line("r", "reader", "read") + line("w", "ci", "read,write") +
                                     "   # indented comment\n" + line("a", "ops", "admin") + " # trailing",
                                 "tokens");
  REQUIRE(table);
  CHECK(table->size() == 3);
}

TEST_CASE("server::TokenTable reports malformed lines with file and line number") {
  struct Case {
    std::string text;
    std::string message_part;
  };
  const Case cases[] = {
      {"\n" + hash_token("x") + " name\n", "tokens:2: expected"},
      {hash_token("x") + " name read extra\n", "tokens:1: expected"},
      {"secret name read\n", "tokens:1: the first field must be 64 lowercase hex digits"},
      {"# c\n" + hash_token("x") + " name reed\n", "tokens:2: unknown scope \"reed\""},
      {hash_token("x") + " name read,,write\n", "tokens:1: unknown scope \"\""},
  };
  for (const auto& c : cases) {
    CAPTURE(c.text);
    auto table = TokenTable::parse(c.text, "tokens");
    REQUIRE_FALSE(table);
    CHECK(table.error().code() == opcache::ErrorCode::usage);
    CHECK(table.error().message().find(c.message_part) != std::string::npos);
  }
}

TEST_CASE("server::TokenTable orders scopes read < write < admin") {
  auto table = TokenTable::parse(line("r", "reader", "read") + line("w", "writer", "write") + line("a", "admin", "admin"),
                                 "tokens");
  REQUIRE(table);
  struct Case {
    const char* token;
    Scope required;
    int status;
  };
  const Case cases[] = {
      {"r", Scope::read, 200},  {"r", Scope::write, 403}, {"r", Scope::admin, 403},
      {"w", Scope::read, 200},  {"w", Scope::write, 200}, {"w", Scope::admin, 403},
      {"a", Scope::read, 200},  {"a", Scope::write, 200}, {"a", Scope::admin, 200},
  };
  for (const auto& c : cases) {
    CAPTURE(c.token);
    CAPTURE(to_string(c.required));
    auto decision = table->authorize(bearer(c.token), c.required, false);
    CHECK(decision.status == c.status);
  }
  auto denied = table->authorize(bearer("r"), Scope::write, false);
  CHECK(denied.identity.name == "reader");
  CHECK(denied.message.find("needs write") != std::string::npos);
  CHECK(denied.message.find("\"r\"") == std::string::npos);  // never the token itself
}

TEST_CASE("server::TokenTable allows anonymous reads only when enabled and only for read routes") {
  TokenTable empty;
  CHECK(empty.authorize("", Scope::none, false).status == 200);
  CHECK(empty.authorize("", Scope::read, false).status == 401);
  CHECK(empty.authorize("", Scope::read, true).status == 200);
  CHECK(empty.authorize("", Scope::read, true).identity.name == "-");
  CHECK(empty.authorize("", Scope::write, true).status == 401);
  CHECK(empty.authorize("", Scope::admin, true).status == 401);
}

TEST_CASE("server::TokenTable rejects unknown tokens and malformed Authorization headers") {
  auto table = TokenTable::parse(line("good", "ci", "write"), "tokens");
  REQUIRE(table);
  CHECK(table->authorize(bearer("good"), Scope::write, false).status == 200);
  CHECK(table->authorize(bearer("goodx"), Scope::read, true).status == 401);
  CHECK(table->authorize(bearer("goo"), Scope::read, false).message == "unknown token");
  CHECK(table->authorize("Basic Z29vZA==", Scope::read, false).status == 401);
  CHECK(table->authorize("Bearer ", Scope::read, false).status == 401);
  CHECK(table->authorize("good", Scope::read, false).status == 401);
}

TEST_CASE("server::TokenTable compares against every entry (constant time, no early exit)") {
  // The comparison walks the whole table whatever matches, so the last line
  // holding a hash decides; an early-exit search would stop at the first.
  auto table = TokenTable::parse(line("t", "first", "read") + line("t", "second", "admin"), "tokens");
  REQUIRE(table);
  auto decision = table->authorize(bearer("t"), Scope::admin, false);
  CHECK(decision.status == 200);
  CHECK(decision.identity.name == "second");
}

TEST_CASE("server::hash_token is the lowercase SHA-256 hex of the token") {
  CHECK(hash_token("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}
