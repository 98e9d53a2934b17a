// Running programs (base/subprocess.cpp).
#include <doctest/doctest.h>

#include <string>

#include "base/subprocess.hpp"
#include "tests/support/temp_dir.hpp"

using opcache::base::run_program;

TEST_CASE("base::run_program captures standard output, standard error and the exit status") {
  auto output = run_program({"sh", "-c", "echo out; echo err >&2; exit 3"});
  REQUIRE(output);
  CHECK(output->out == "out\n");
  CHECK(output->err == "err\n");
  CHECK(output->exit_code == 3);
}

TEST_CASE("base::run_program runs in the given directory with standard input from /dev/null") {
  opcache::test::TempDir dir;
  auto output = run_program({"sh", "-c", "pwd -P; cat"}, dir.path());
  REQUIRE(output);
  CHECK(output->exit_code == 0);
  CHECK(output->out == std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST_CASE("base::run_program reports a signal as 128 + its number") {
  auto output = run_program({"sh", "-c", "kill -9 $$"});
  REQUIRE(output);
  CHECK(output->exit_code == 128 + 9);
}

TEST_CASE("base::run_program caps captured output and still drains the rest") {
  auto output = run_program({"sh", "-c", "head -c 1000000 /dev/zero; echo done >&2"});
  REQUIRE(output);
  CHECK(output->exit_code == 0);
  CHECK(output->out.size() == opcache::base::k_max_captured);
  CHECK(output->err == "done\n");
}

TEST_CASE("base::run_program names a program that cannot be started") {
  auto output = run_program({"opcache-no-such-program-xyz"});
  REQUIRE_FALSE(output);
  CHECK(output.error().message().find("cannot run \"opcache-no-such-program-xyz\"") != std::string::npos);
}
