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

  /// The local store, then the remotes: true when `key` is (now) stored
  /// locally. `scenario`, when the caller knows it, lets a remote prefetch it.
  Result<bool> fetch_from_remotes(const std::string& key, const Scenario* scenario = nullptr);

  /// Queues a freshly stored key for background upload, to every uploading
  /// remote but `uploaded_to` (which has it already).
  void after_store(const std::string& key, const remote::Remote* uploaded_to = nullptr) {
    if (remotes) {
      remotes->enqueue_upload(key, uploaded_to);
    }
  }

  /// Parses and normalizes a descriptor given as JSON text.
  Result<store::Descriptor> descriptor(std::string_view json_text) const;
};

}  // namespace opcache
