// Fuzz target: INI text (base/ini, inih) and every reader of a config file:
// the store's settings (store/settings: opcache.conf and CANN's
// op_cache.ini in the cache directory), the remotes' [remote "…"] sections
// (remote/remote_config) and the server's [serve] section
// (server/server_config). The bytes are written as each of those files.
#include <cstdint>
#include <optional>
#include <string>

#include "base/ini.hpp"
#include "remote/remote_config.hpp"
#include "server/server_config.hpp"
#include "store/settings.hpp"
#include "tests/fuzz/fuzz_support.hpp"

namespace {

using namespace opcache;

std::optional<std::string> no_environment(const char*) { return std::nullopt; }

void resolve_store_settings(const std::filesystem::path& cache_dir, const std::filesystem::path& config_file) {
  store::SettingOverrides overrides;
  overrides.cache_dir = cache_dir;
  overrides.config_file = config_file;
  auto settings = store::resolve_settings(overrides, no_environment);
  if (!settings) {
    return;
  }
  (void)settings->aging();
  (void)settings->bypass_reason("MatMulV2");
  (void)remote::resolve_remotes(remote::RemoteOverrides{}, no_environment, config_file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(fuzz::as_text(data, size));
  (void)base::parse_ini_sections(text, "fuzz input");
  const auto root = fuzz::scratch_directory();
  const auto cache_dir = root / "cache";
  const auto config_file = root / "opcache.conf";
  fuzz::write_file(config_file, text);
  fuzz::write_file(cache_dir / "op_cache.ini", text);
  resolve_store_settings(cache_dir, config_file);
  server::ServerConfig config;
  if (server::load_server_config_file(config_file, config)) {
    (void)server::validate_server_config(config);
  }
  return 0;
}
