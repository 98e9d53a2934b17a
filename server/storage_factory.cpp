#include "server/storage_factory.hpp"

#include "server/local_storage.hpp"
#include "server/s3_storage.hpp"
#include "store/settings.hpp"
#include "base/try.hpp"

namespace opcache::server {

namespace {

Result<std::unique_ptr<Storage>> open_local(const ServerConfig& config, const base::EnvLookup& env,
                                            const std::function<void(const std::string&)>& warn) {
  store::SettingOverrides overrides;
  overrides.cache_dir = config.storage;
  OPCACHE_TRY_ASSIGN(auto settings, store::resolve_settings(overrides, env));
  for (const auto& warning : settings.warnings) {
    warn(warning);
  }
  store::StoreOptions options;
  options.root = config.storage;
  options.aging = settings.aging();
  options.sharing = settings.shared_group.value ? store::Sharing::group : store::Sharing::owner;
  options.warn = warn;
  return make_local_storage(std::move(options), config.bundle_cache_bytes);
}

}  // namespace

Result<std::unique_ptr<Storage>> open_storage(const ServerConfig& config, const base::EnvLookup& env,
                                              const std::function<void(const std::string&)>& warn) {
  if (config.storage.rfind("s3://", 0) == 0) {
    return make_s3_storage(config.storage, env, config.temp_dir, static_cast<std::int64_t>(config.max_body_bytes));
  }
  return open_local(config, env, warn);
}

}  // namespace opcache::server
