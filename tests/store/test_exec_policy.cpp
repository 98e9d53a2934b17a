// store/exec_policy: the grammar of compiler_check and exec_env.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "store/exec_policy.hpp"

using opcache::CompilerCheck;
using opcache::store::default_exec_environment;
using opcache::store::parse_compiler_check;
using opcache::store::parse_exec_environment;

TEST_CASE("store::parse_compiler_check reads the five forms and round-trips them") {
  for (const std::string text : {"content", "mtime", "none", "string:gcc-12.2", "command:%compiler% -v"}) {
    auto check = parse_compiler_check(text);
    REQUIRE(check.ok());
    CHECK(opcache::store::to_string(*check) == text);
  }
  CHECK(parse_compiler_check("string:v1")->kind == CompilerCheck::Kind::string);
  CHECK(parse_compiler_check("string:v1")->argument == "v1");
  CHECK(parse_compiler_check("command:x --version")->argument == "x --version");
}

TEST_CASE("store::parse_compiler_check refuses unknown values and empty arguments, saying what it expects") {
  for (const std::string text : {"", "Content", "sometimes", "string:", "command:"}) {
    auto check = parse_compiler_check(text);
    REQUIRE_FALSE(check.ok());
    CHECK(check.error().code() == opcache::ErrorCode::usage);
    CHECK(check.error().message().find("content, mtime, none, string:TEXT or command:CMD") != std::string::npos);
  }
}

TEST_CASE("store::parse_exec_environment: built-in list, none, +additions, replacement, bad names") {
  CHECK(parse_exec_environment("").value() == default_exec_environment());
  CHECK(parse_exec_environment("none").value().empty());
  auto added = parse_exec_environment("+MY_FLAGS, CPATH");
  REQUIRE(added.ok());
  CHECK(added->size() == default_exec_environment().size() + 1);
  CHECK(std::is_sorted(added->begin(), added->end()));
  CHECK(std::count(added->begin(), added->end(), "MY_FLAGS") == 1);
  CHECK(std::count(added->begin(), added->end(), "CPATH") == 1);
  CHECK(parse_exec_environment("B_VAR,A_VAR,,B_VAR").value() == std::vector<std::string>{"A_VAR", "B_VAR"});
  auto bad = parse_exec_environment("CPATH,1ST");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().message().find("\"1ST\"") != std::string::npos);
  for (const auto& name : {"CPATH", "NVCC_APPEND_FLAGS", "NVCC_PREPEND_FLAGS", "ASCEND_OPP_PATH"}) {
    CHECK(std::count(default_exec_environment().begin(), default_exec_environment().end(), name) == 1);
  }
}
