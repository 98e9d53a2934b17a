// Key records: where a hit finds its object without opening the index.
#pragma once

#include <optional>
#include <string>

#include "opcache/result.hpp"
#include "store/cache_root.hpp"
#include "store/index.hpp"

namespace opcache::store {

/// The version of the key record format (docs/formats.md "Key records"). A
/// record of another version reads as absent: the lookup then goes to the
/// index, whose schema version refuses a store newer than this code.
inline constexpr int k_key_record_format = 1;

/// One file per stored key, keys/<first two hex digits>/<key>, holding the
/// key's index row without its hit statistics (`hits`, `last_access_ms`).
/// The index stays the truth: a record is a hint that a hit checks against
/// the bundle it names (the bundle's key and digest), and a record that is
/// missing, unreadable, of another format or stale sends the lookup to the
/// index, which writes it again. Records are written without fsync (a power
/// cut that loses one costs one index lookup). Process-safe: each record is
/// replaced by rename.
class KeyTable {
 public:
  explicit KeyTable(const StoreLayout& layout) : m_layout(layout) {}

  /// keys/<first two hex digits>/<key>
  std::filesystem::path record_path(const std::string& key) const;

  /// The record of `key` (`hits` 0, `last_access_ms` 0), or std::nullopt
  /// when there is none or it cannot be used. Never an error: the index decides.
  std::optional<IndexEntry> read(const std::string& key) const;

  /// Writes (or replaces) the record of `entry.key`.
  Status write(const IndexEntry& entry) const;

  /// Removes the record of `key`; an absent record is not an error.
  Status erase(const std::string& key) const;

 private:
  const StoreLayout& m_layout;
};

}  // namespace opcache::store
