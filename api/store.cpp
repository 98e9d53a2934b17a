// The public C++ API (include/opcache/opcache.hpp) over store/.
#include <mutex>

#include "opcache/opcache.hpp"
#include "store/descriptor.hpp"
#include "store/json_parse.hpp"
#include "store/canonical_json.hpp"
#include "store/key.hpp"
#include "store/local_store.hpp"
#include "store/scenario.hpp"
#include "store/try.hpp"
#include "store/volatile_fields.hpp"

namespace opcache {

struct Store::Impl {
  std::unique_ptr<store::LocalStore> local;
  store::VolatileFieldFilter volatile_fields;

  Result<store::Descriptor> descriptor(std::string_view json_text) const {
    OPCACHE_TRY_ASSIGN(auto raw, store::parse_json(json_text, "descriptor"));
    return store::normalize_descriptor(raw, volatile_fields, "descriptor");
  }
};

Store::Store(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

Result<Store> Store::open(const StoreConfig& config) {
  auto env = store::process_environment();
  std::optional<std::filesystem::path> flag;
  if (!config.cache_dir.empty()) {
    flag = config.cache_dir;
  }
  OPCACHE_TRY_ASSIGN(auto root, store::resolve_cache_root(flag, env));
  auto setting = config.volatile_fields ? config.volatile_fields : env("OPCACHE_VOLATILE_FIELDS");
  OPCACHE_TRY_ASSIGN(auto filter, store::VolatileFieldFilter::from_setting(setting));

  store::StoreOptions options;
  options.root = root.path;
  options.compression_level = config.compression_level;
  options.warn = config.on_warning;
  OPCACHE_TRY_ASSIGN(auto local, store::LocalStore::open(std::move(options)));
  auto impl = std::make_unique<Impl>(Impl{std::move(local), std::move(filter)});
  return Store(std::move(impl));
}

const std::filesystem::path& Store::root() const { return m_impl->local->layout().root(); }

Result<std::string> Store::key(std::string_view descriptor_json, const Scenario& scenario) const {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  return store::derive_key(descriptor.normalized, store::scenario_to_json(scenario));
}

Result<std::string> Store::canonical_descriptor(std::string_view descriptor_json) const {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  return store::canonical_json(descriptor.normalized);
}

Result<PutResult> Store::put(std::string_view descriptor_json, const Scenario& scenario,
                             const std::vector<std::filesystem::path>& files, const PutOptions& options) {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  store::BundleInput input;
  input.descriptor = std::move(descriptor.normalized);
  input.scenario = store::scenario_to_json(scenario);
  input.build_ms = options.build_ms;
  for (const auto& file : files) {
    input.members.push_back({file.filename().string(), file, ""});
  }
  return m_impl->local->put(input, options.replace);
}

Result<std::optional<GetResult>> Store::get(std::string_view key, const std::filesystem::path& out_dir) {
  return m_impl->local->get(std::string(key), out_dir);
}

Result<std::optional<Entry>> Store::lookup(std::string_view key) {
  OPCACHE_TRY(store::check_key(key));
  return m_impl->local->lookup(std::string(key));
}

Result<bool> Store::contains(std::string_view key) { return m_impl->local->contains(std::string(key)); }

Result<bool> Store::remove(std::string_view key) { return m_impl->local->remove(std::string(key)); }

Result<std::vector<Entry>> Store::list(const ListFilter& filter) { return m_impl->local->list(filter); }

Result<StoreStats> Store::stats() { return m_impl->local->stats(); }

Result<VerifyReport> Store::verify(bool repair) { return m_impl->local->verify(repair); }

}  // namespace opcache
