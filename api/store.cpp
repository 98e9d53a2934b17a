// The public C++ API (include/opcache/opcache.hpp) over store/: opening,
// settings, and the explicit operations. get_or_build is in get_or_build.cpp.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <utility>

#include "api/store_impl.hpp"
#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "base/try.hpp"
#include "remote/remote_store.hpp"
#include "remote/transfer.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"

namespace opcache {

Result<bool> Store::Impl::fetch_from_remotes(const std::string& key, const remote::LookupHint& hint,
                                             const Scenario* prefetch) {
  if (!remotes || remotes->empty()) {
    return false;
  }
  if (prefetch == nullptr) {
    return remotes->fetch_into_local(key, hint);
  }
  const ListFilter filter = scenario_filter(*prefetch);
  return remotes->fetch_into_local(key, hint, &filter);
}

Result<store::Descriptor> Store::Impl::descriptor(std::string_view json_text) const {
  OPCACHE_TRY_ASSIGN(auto raw, base::parse_json(json_text, "descriptor"));
  return normalized_descriptor(std::move(raw));
}

Result<store::Descriptor> Store::Impl::normalized_descriptor(nlohmann::json raw) const {
  return store::normalize_descriptor(std::move(raw), volatile_fields, "descriptor");
}

Store::Store(std::unique_ptr<Impl> impl) : m_impl(std::move(impl)) {}
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;
Store::~Store() = default;

namespace {

// "host:pid": how the machines that wait name this process.
std::string holder_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) {
    std::snprintf(host, sizeof host, "unknown-host");
  }
  return std::string(host) + ":" + std::to_string(::getpid());
}

// Team single flight when it is on, the mode is `enable` and a remote can
// coordinate (remote/team_flight.hpp); else null.
std::unique_ptr<remote::TeamFlight> open_team_flight(const store::Settings& settings, const remote::RemoteSet* remotes,
                                                     store::LocalStore& local) {
  const remote::Remote* team = remotes != nullptr ? remotes->team_remote() : nullptr;
  if (team == nullptr || !settings.team_single_flight.value || settings.mode.value != store::CacheMode::enable) {
    return nullptr;
  }
  remote::TeamFlightOptions options;
  options.holder = holder_name();
  options.max_wait = std::chrono::seconds(settings.wait_timeout_s.value);
  return std::make_unique<remote::TeamFlight>(*team, local, std::move(options));
}

// A signing-key or trusted-keys problem names the setting and its source;
// a missing file is a configuration mistake (`usage`), not a miss.
Error setting_error(const Error& error, const store::Setting<std::string>& setting, const char* name) {
  const auto code = error.code() == ErrorCode::not_found ? ErrorCode::usage : error.code();
  return Error(code, std::string(name) + " (from " + setting.source + "): " + error.message());
}

// The signing key and trust policy that the settings name, loaded.
Status load_signature_settings(const store::Settings& settings, store::StoreOptions& options) {
  if (!settings.signing_key.value.empty()) {
    auto key = base::Ed25519PrivateKey::load_pem_file(settings.signing_key.value);
    if (!key) {
      return setting_error(key.error(), settings.signing_key, "signing_key");
    }
    options.signing_key = std::make_shared<const base::Ed25519PrivateKey>(std::move(*key));
  }
  auto policy = std::make_shared<store::TrustPolicy>();
  policy->requirement = settings.require_signature.value;
  if (!settings.trusted_keys.value.empty()) {
    auto trusted = store::TrustedKeys::load(settings.trusted_keys.value);
    if (!trusted) {
      return setting_error(trusted.error(), settings.trusted_keys, "trusted_keys");
    }
    policy->trusted = std::move(*trusted);
  }
  options.trust = std::move(policy);
  return {};
}

}  // namespace

Result<Store> Store::open(const StoreConfig& config) {
  OPCACHE_TRY_ASSIGN(auto settings, store::resolve_settings(config, base::process_environment()));
  OPCACHE_TRY_ASSIGN(auto filter, store::VolatileFieldFilter::from_setting(settings.volatile_fields.value));
  auto warn = config.on_warning;
  if (!warn) {
    warn = [](const std::string& message) { std::fprintf(stderr, "opcache: warning: %s\n", message.c_str()); };
  }
  for (const auto& warning : settings.warnings) {
    warn(warning);
  }
  store::StoreOptions options;
  options.root = settings.cache_dir.value;
  options.compression_level = config.compression_level;
  options.aging = settings.aging();
  options.sharing = settings.shared_group.value ? store::Sharing::group : store::Sharing::owner;
  options.warn = warn;
  // A new store's index is created by what first uses it: nothing under
  // --mode disable (no SQLite loaded, no index.db), and for an exec miss the
  // thread that opens the index while the command runs (StoreWarmup), so
  // that creating it (SQLite's journal switch and fdatasyncs, ~8 ms here)
  // is not waited for before the command starts.
  options.new_index = store::NewIndex::on_first_use;
  OPCACHE_TRY(load_signature_settings(settings, options));
  OPCACHE_TRY_ASSIGN(auto local, store::LocalStore::open(std::move(options)));
  auto impl = std::make_unique<Impl>();
  impl->opened_at_ms = local->options().clock();
  impl->local = std::move(local);
  remote::RemoteOverrides remote_overrides;
  remote_overrides.remotes = config.remotes;
  remote_overrides.no_remote = config.no_remote;
  if (!config.token_file.empty()) {
    remote_overrides.token_file = config.token_file;
  }
  std::optional<std::filesystem::path> config_file;
  if (!settings.config_file.value.empty()) {
    config_file = settings.config_file.value;
  }
  auto env = base::process_environment();
  OPCACHE_TRY_ASSIGN(auto remote_options, remote::resolve_remotes(remote_overrides, env, config_file));
  if (!remote_options.empty()) {
    OPCACHE_TRY_ASSIGN(impl->remotes, remote::RemoteSet::open(remote_options, *impl->local, env));
  }
  impl->team = open_team_flight(settings, impl->remotes.get(), *impl->local);
  impl->settings = std::move(settings);
  impl->volatile_fields = std::move(filter);
  return Store(std::move(impl));
}

const std::filesystem::path& Store::root() const { return m_impl->local->layout().root(); }

Result<std::string> Store::key(std::string_view descriptor_json, const Scenario& scenario) const {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  return store::derive_key(descriptor.normalized, store::scenario_to_json(scenario));
}

Result<std::string> Store::canonical_descriptor(std::string_view descriptor_json) const {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  return base::canonical_json(descriptor.normalized);
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
  OPCACHE_TRY_ASSIGN(auto result, m_impl->local->put(input, options.replace));
  if (result.stored) {
    m_impl->after_store(result.key);
  }
  return result;
}

Result<std::optional<GetResult>> Store::Impl::get(const std::string& key, const remote::LookupHint& hint,
                                                  const std::filesystem::path& out_dir) {
  check_revocations();
  OPCACHE_TRY_ASSIGN(auto found, local->get(key, out_dir));
  if (found) {
    return found;
  }
  OPCACHE_TRY_ASSIGN(bool fetched, fetch_from_remotes(key, hint));
  if (!fetched) {
    return found;
  }
  return local->get(key, out_dir);
}

Result<std::optional<GetResult>> Store::get(std::string_view key, const std::filesystem::path& out_dir) {
  return m_impl->get(std::string(key), remote::LookupHint{}, out_dir);
}

Result<std::optional<GetResult>> Store::get(std::string_view descriptor_json, const Scenario& scenario,
                                            const std::filesystem::path& out_dir) {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  const auto scenario_json = store::scenario_to_json(scenario);
  OPCACHE_TRY_ASSIGN(auto key, store::derive_key(descriptor.normalized, scenario_json));
  return m_impl->get(key, m_impl->lookup_hint(descriptor.op_type, scenario_json), out_dir);
}

Result<std::optional<Entry>> Store::lookup(std::string_view key) {
  OPCACHE_TRY(store::check_key(key));
  return m_impl->local->lookup(std::string(key));
}

Result<std::optional<std::vector<std::string>>> Store::member_names(std::string_view key) {
  OPCACHE_TRY(store::check_key(key));
  OPCACHE_TRY_ASSIGN(auto manifest, m_impl->local->read_manifest(std::string(key)));
  if (!manifest) {
    return std::optional<std::vector<std::string>>();
  }
  std::vector<std::string> names;
  for (const auto& member : manifest->members) {
    names.push_back(member.name);
  }
  return std::optional<std::vector<std::string>>(std::move(names));
}

Result<bool> Store::contains(std::string_view key) { return m_impl->local->contains(std::string(key)); }

Result<bool> Store::remove(std::string_view key) { return m_impl->local->remove(std::string(key)); }

Result<std::vector<Entry>> Store::list(const ListFilter& filter) { return m_impl->local->list(filter); }

Result<StoreStats> Store::stats() { return m_impl->local->stats(); }

Result<VerifyReport> Store::verify(bool repair) { return m_impl->local->verify(repair); }

Result<GcReport> Store::gc(bool dry_run) {
  return m_impl->local->collect_garbage(m_impl->settings.aging(),
                                        dry_run ? store::GcMode::dry_run : store::GcMode::remove);
}

Result<bool> Store::set_pinned(std::string_view key, bool pinned) {
  return m_impl->local->set_pinned(std::string(key), pinned);
}

Result<ClearReport> Store::clear() { return m_impl->local->clear(); }

bool remote_has_server(std::string_view remote_spec) noexcept {
  const remote::RemoteScheme* scheme = remote::find_remote_scheme(remote_spec.substr(0, remote_spec.find('|')));
  return scheme != nullptr && scheme->kind == remote::RemoteKind::server;
}

std::optional<std::string> Store::bypass_reason(const std::string& op_type) const {
  const auto& settings = m_impl->settings;
  if (settings.mode.value == store::CacheMode::disable) {
    return "mode is disable (from " + settings.mode.source + ")";
  }
  return settings.bypass_reason(op_type);
}

std::vector<std::string> Store::remote_names() const {
  std::vector<std::string> names;
  if (m_impl->remotes) {
    for (const auto& remote : m_impl->remotes->remotes()) {
      std::string attributes;
      if (remote.options.read_only) attributes += " read-only";
      if (remote.options.upload) attributes += " upload";
      names.push_back(remote.store->name() + attributes + " (" + remote.options.source + ")");
    }
  }
  return names;
}

namespace {

remote::TransferRequest transfer_request(const Store::TransferOptions& options) {
  remote::TransferRequest request;
  request.keys = options.keys;
  request.filter = options.filter;
  request.parallelism = options.parallelism;
  request.progress = options.progress;
  request.cancel = options.cancel;
  request.add_signatures = options.add_signatures;
  return request;
}

}  // namespace

Result<const remote::Remote*> Store::Impl::select_remote(const std::string& name_or_url) const {
  if (!remotes) {
    return Error::usage("no remote configured: pass --remote URL, set OPCACHE_REMOTE, or add a [remote \"NAME\"] "
                        "section to the config file");
  }
  return remotes->select(name_or_url);
}

Result<TransferSummary> Store::push(const TransferOptions& options) {
  OPCACHE_TRY_ASSIGN(auto remote, m_impl->select_remote(options.remote));
  return remote::push(*m_impl->local, *remote, transfer_request(options));
}

Result<TransferSummary> Store::pull(const TransferOptions& options) {
  OPCACHE_TRY_ASSIGN(auto remote, m_impl->select_remote(options.remote));
  m_impl->check_revocations(remote::RevocationCheck::now);
  return remote::pull(*m_impl->local, *remote, transfer_request(options));
}

Result<ServerStats> Store::server_stats(const ServerStatsOptions& options) {
  OPCACHE_TRY_ASSIGN(auto remote, m_impl->select_remote(options.remote));
  remote::ServerStatistics* statistics = remote->store->statistics();
  if (statistics == nullptr) {
    return Error::usage(remote->store->name() +
                        " has no server to ask for statistics: give the http(s) URL of an "
                        "opcache serve (s3:// and file:// remotes are plain storage)");
  }
  ServerStats stats;
  stats.remote = remote->store->name();
  OPCACHE_TRY_ASSIGN(stats.summary_json, statistics->stats_summary(options.window));
  OPCACHE_TRY_ASSIGN(stats.misses_json, statistics->stats_misses(options.misses_limit));
  return stats;
}

namespace {

Status check_revoke_keys(const std::vector<std::string>& keys) {
  if (keys.empty()) {
    return Error::usage("no key given: name the keys to revoke (opcache key prints a descriptor's)");
  }
  for (const auto& key : keys) {
    OPCACHE_TRY(store::check_key(key));
  }
  return {};
}

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Result<std::vector<bool>> Store::revoke(const RevokeOptions& options) {
  OPCACHE_TRY(check_revoke_keys(options.keys));
  OPCACHE_TRY(store::check_revocation_reason(options.reason));
  auto& local = *m_impl->local;
  std::vector<bool> deleted;
  if (options.local) {
    const std::int64_t now_ms = unix_ms_now();
    for (const auto& key : options.keys) {
      OPCACHE_TRY_ASSIGN(bool had, local.revoke(store::Tombstone{key, options.reason, now_ms}));
      if (had) {
        (void)local.record_counter("revoked", 1);
      }
      deleted.push_back(had);
    }
    return deleted;
  }
  OPCACHE_TRY_ASSIGN(auto remote, m_impl->select_remote(options.remote));
  OPCACHE_TRY_ASSIGN(deleted, remote->store->revoke(options.keys, options.reason,
                                                     local.options().signing_key.get()));
  // This machine learns of it at once, not at its next check.
  for (const auto& key : options.keys) {
    (void)m_impl->remotes->purge_revoked(key, "revoked on " + remote->store->name() + ": " + options.reason);
  }
  return deleted;
}

Result<std::vector<bool>> Store::unrevoke(const RevokeOptions& options) {
  OPCACHE_TRY(check_revoke_keys(options.keys));
  std::vector<bool> removed;
  if (options.local) {
    for (const auto& key : options.keys) {
      OPCACHE_TRY_ASSIGN(bool had, m_impl->local->unrevoke(key));
      removed.push_back(had);
    }
    return removed;
  }
  OPCACHE_TRY_ASSIGN(auto remote, m_impl->select_remote(options.remote));
  for (const auto& key : options.keys) {
    OPCACHE_TRY_ASSIGN(bool had, remote->store->unrevoke(key));
    removed.push_back(had);
  }
  return removed;
}

std::vector<SettingInfo> Store::settings() const {
  std::vector<SettingInfo> shown;
  for (const auto& spec : store::setting_specs()) {
    if (spec.show != nullptr) {
      auto value = spec.show(m_impl->settings);
      shown.push_back({std::string(spec.info.display), std::move(value.value), std::move(value.source)});
    }
  }
  return shown;
}

ExecKeyPolicy Store::exec_key_policy() const {
  return {m_impl->settings.compiler_check.value, m_impl->settings.exec_env.value, m_impl->settings.base_dir.value};
}

const char* to_string(SettingType type) noexcept {
  switch (type) {
    case SettingType::text: return "text";
    case SettingType::path: return "path";
    case SettingType::integer: return "integer";
    case SettingType::comma_list: return "comma_list";
    case SettingType::repeated: return "repeated";
    case SettingType::flag: return "flag";
  }
  return "text";
}

const std::vector<SettingDescriptor>& setting_descriptors() {
  // The remotes' help names the URL schemes of remote/'s scheme table, so a new kind of remote
  // shows in --remote's help, the C ABI's schema and the Python keywords without a second list.
  static std::string remotes_help;  // written once, while `descriptors` is initialised
  static const std::vector<SettingDescriptor> descriptors = [] {
    std::vector<SettingDescriptor> rows;
    for (const auto& spec : store::setting_specs()) {
      rows.push_back(spec.info);
      if (spec.info.name == "remotes") {
        remotes_help = std::string(spec.info.help) + "; a URL starts with " + remote::remote_scheme_names();
        rows.back().help = remotes_help;
      }
    }
    return rows;
  }();
  return descriptors;
}

Status StoreConfig::set(std::string_view name, std::string_view value) {
  const auto* spec = store::find_setting(name);
  if (spec == nullptr || !spec->info.settable) {
    return Error::usage("unknown setting \"" + std::string(name) + "\" (allowed: " + store::settable_names() + ")");
  }
  return store::assign_setting(*this, *spec, std::string(value));
}

}  // namespace opcache

namespace opcache {

Status check_signer_name(std::string_view name) {
  if (!store::valid_signer_name(name)) {
    return Error::usage("key name \"" + std::string(name.substr(0, 128)) +
                        "\" must be 1-128 of A-Z a-z 0-9 . _ @ + -");
  }
  return {};
}

Result<SignReport> Store::sign(const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    OPCACHE_TRY(store::check_key(key));
  }
  return m_impl->local->sign_entries(keys);
}

Result<std::vector<UntrustedEntry>> Store::untrusted_entries() {
  OPCACHE_TRY_ASSIGN(auto findings, m_impl->local->find_untrusted_entries());
  std::vector<UntrustedEntry> entries;
  entries.reserve(findings.size());
  for (const auto& finding : findings) {
    entries.push_back({finding.key, finding.op_type, finding.refusal.describe(), finding.refusal.error_code()});
  }
  return entries;
}

std::string Store::signature_requirement() const {
  const auto& trust = m_impl->local->options().trust;
  return store::to_string(trust ? trust->requirement : store::SignatureRequirement::off);
}

std::string Store::trusted_name(std::string_view public_key) const {
  const auto& trust = m_impl->local->options().trust;
  const auto* key = trust ? trust->trusted.find(public_key) : nullptr;
  return key != nullptr ? key->name : std::string();
}

}  // namespace opcache
