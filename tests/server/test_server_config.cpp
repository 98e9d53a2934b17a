// The [serve] section of `opcache serve`'s config file (server/server_config.hpp).
#include <doctest/doctest.h>

#include <string>

#include "server/server_config.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using opcache::server::ServerConfig;
using opcache::test::TempDir;

// Loads "[serve]\n<line>" into a default config; the error message, or "" on success.
std::string load_line(const TempDir& temp, const std::string& line, ServerConfig& config) {
  const auto path = temp / "serve.ini";
  opcache::test::write_text(path, "[serve]\n" + line + "\n");
  auto loaded = opcache::server::load_server_config_file(path, config);
  return loaded.ok() ? "" : loaded.error().message();
}

}  // namespace

TEST_CASE("server::[serve] bundle_cache sets the bytes of bundles kept in memory, 0 keeps none, and text is refused") {
  TempDir temp;
  ServerConfig config;
  CHECK(config.bundle_cache_bytes == 64u << 20);
  CHECK(load_line(temp, "bundle_cache = 1048576", config).empty());
  CHECK(config.bundle_cache_bytes == 1048576);
  CHECK(load_line(temp, "bundle_cache = 0", config).empty());
  CHECK(config.bundle_cache_bytes == 0);
  const std::string refused = load_line(temp, "bundle_cache = lots", config);
  CHECK(refused.find("bundle_cache") != std::string::npos);
  CHECK(load_line(temp, "bundle_cache = -1", config).find("must be an integer") != std::string::npos);
}
