// The state behind opcache::Store (internal to api/).
#pragma once

#include <memory>
#include <string_view>

#include "opcache/opcache.hpp"
#include "remote/remote_set.hpp"
#include "remote/team_flight.hpp"
#include "store/descriptor.hpp"
#include "store/local_store.hpp"
#include "store/settings.hpp"
#include "store/volatile_fields.hpp"

namespace opcache {

struct Store::Impl {
  std::unique_ptr<store::LocalStore> local;
  std::unique_ptr<remote::RemoteSet> remotes;  ///< destroyed before `local`, which it refers to
  std::unique_ptr<remote::TeamFlight> team;    ///< team single flight, or null; destroyed first
  store::Settings settings;
  store::VolatileFieldFilter volatile_fields;
  std::int64_t opened_at_ms = 0;  ///< force mode rebuilds entries stored before this

  /// The remotes, in order: true when `key` is (now) stored locally. `hint`
  /// tells an opcache server what the key is, when the caller knows it;
  /// `prefetch`, the lookup's scenario, lets a remote prefetch it.
  Result<bool> fetch_from_remotes(const std::string& key, const remote::LookupHint& hint,
                                  const Scenario* prefetch = nullptr);

  /// What a server is told of the lookups of a descriptor with `op_type` in
  /// `scenario` (its JSON); built only when there is a remote to tell.
  remote::LookupHint lookup_hint(const std::string& op_type, const nlohmann::json& scenario) const {
    return remotes ? remote::make_lookup_hint(op_type, scenario) : remote::LookupHint{};
  }

  /// Store::get: the local store, then the remotes (told `hint`).
  Result<std::optional<GetResult>> get(const std::string& key, const remote::LookupHint& hint,
                                       const std::filesystem::path& out_dir);

  /// Reads the remotes' revocation lists when due (`when`: at most once per
  /// revocation_check_interval per cache directory, or now) and deletes
  /// the revoked entries from the local store (RemoteSet::check_revocations).
  void check_revocations(remote::RevocationCheck when = remote::RevocationCheck::when_due) {
    if (remotes && !remotes->empty()) {
      (void)remotes->check_revocations(settings.revocation_check_interval_s.value, when);
    }
  }

  /// Queues a freshly stored key for background upload, to every uploading
  /// remote but `uploaded_to` (which has it already).
  void after_store(const std::string& key, const remote::Remote* uploaded_to = nullptr) {
    if (remotes) {
      remotes->enqueue_upload(key, uploaded_to);
    }
  }

  /// The remote named by `name_or_url` (RemoteSet::select); `usage` error
  /// when no remote is configured.
  Result<const remote::Remote*> select_remote(const std::string& name_or_url) const;

  /// Parses and normalizes a descriptor given as JSON text.
  Result<store::Descriptor> descriptor(std::string_view json_text) const;

  /// Normalizes a descriptor already parsed (store::normalize_descriptor
  /// with this store's volatile fields).
  Result<store::Descriptor> normalized_descriptor(nlohmann::json raw) const;
};

}  // namespace opcache
