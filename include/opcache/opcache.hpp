// opcache — C++ API.
//
// A compile cache for accelerator operator kernels. A kernel is stored under a
// key derived from its op descriptor (JSON) and its scenario; reading it back
// verifies every byte. Stores are safe to share between threads and between
// processes.
//
//   auto store = opcache::Store::open().value();
//   auto scenario = opcache::parse_scenario("phase=train,toolchain=8.0.RC2,soc=Ascend910B1").value();
//   auto key = store.key(descriptor_json, scenario).value();
//   if (auto hit = store.get(key, "kernel_meta").value()) { ... } else { build; store.put(...); }
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"
#include "opcache/scenario.hpp"
#include "opcache/types.hpp"
#include "opcache/version.hpp"

namespace opcache {

/// How to open a store. Every field has a working default.
struct StoreConfig {
  /// Cache root; empty means: OPCACHE_DIR, else $XDG_CACHE_HOME/opcache,
  /// else ~/.cache/opcache.
  std::filesystem::path cache_dir;
  /// Volatile descriptor field patterns (see docs/formats.md); nullopt means
  /// OPCACHE_VOLATILE_FIELDS, else the built-in list. "none" disables,
  /// "+a,b" adds to the built-in list.
  std::optional<std::string> volatile_fields;
  /// zstd level for new bundles, 1..19.
  int compression_level = 3;
  /// Receives warnings (e.g. a corrupt entry that was dropped); default prints
  /// "opcache: warning: ..." to stderr. Called from the calling thread.
  std::function<void(const std::string& message)> on_warning;
};

/// Options of a put.
struct PutOptions {
  std::int64_t build_ms = 0;  ///< how long building took; feeds "compile time saved"
  ReplacePolicy replace = ReplacePolicy::keep_existing;
};

/// A handle on a local store. Move-only. Thread-safe: one handle may be used
/// from several threads. Several processes may open the same root at once.
class Store {
 public:
  /// Opens (creating if needed) the store described by `config`.
  /// Errors: `usage` (no cache dir, bad settings, foreign or newer index),
  /// `io` (cannot create or open files).
  static Result<Store> open(const StoreConfig& config = {});

  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  ~Store();

  /// The cache root in use.
  const std::filesystem::path& root() const;

  /// The key of a descriptor (JSON text of an object with a non-empty string
  /// "op_type") in a scenario, after removing volatile fields. `usage` error
  /// for bad JSON or descriptors. Pure: touches no files.
  Result<std::string> key(std::string_view descriptor_json, const Scenario& scenario) const;

  /// The descriptor exactly as it is hashed: canonical JSON after removing
  /// volatile fields.
  Result<std::string> canonical_descriptor(std::string_view descriptor_json) const;

  /// Stores `files` (members keep their base names) as the kernel for
  /// descriptor + scenario. With keep_existing an existing entry is kept and
  /// `stored` is false. Files are read twice and must not change meanwhile.
  Result<PutResult> put(std::string_view descriptor_json, const Scenario& scenario,
                        const std::vector<std::filesystem::path>& files, const PutOptions& options = {});

  /// Writes the members of `key` into `out_dir` (created if missing), each
  /// byte-exact and verified. std::nullopt on a miss; an entry whose object is
  /// missing or corrupt is reported through on_warning, dropped, and a miss.
  Result<std::optional<GetResult>> get(std::string_view key, const std::filesystem::path& out_dir);

  /// The index entry of `key`, or std::nullopt. Does not verify the object.
  Result<std::optional<Entry>> lookup(std::string_view key);

  /// True when `key` has an entry whose object file exists.
  Result<bool> contains(std::string_view key);

  /// Removes an entry; false when there was none.
  Result<bool> remove(std::string_view key);

  /// Entries matching `filter`, ordered by key.
  Result<std::vector<Entry>> list(const ListFilter& filter = {});

  /// Totals and counters.
  Result<StoreStats> stats();

  /// Checks every entry against its object, and looks for orphan objects and
  /// stale temp files; with `repair`, removes what is bad.
  Result<VerifyReport> verify(bool repair);

 private:
  struct Impl;
  explicit Store(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> m_impl;
};

}  // namespace opcache
