// Hot bundles of `opcache serve` held in memory: a GET of a recently served
// small bundle is answered without an index lookup, an open and a read.
// Bounded by bytes; the least recently used bundle goes first.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "base/file_io.hpp"
#include "base/mutex.hpp"
#include "store/signature.hpp"

namespace opcache::server {

/// A whole bundle in memory. Its bytes are immutable once made, so responses
/// being sent may share it with the cache (and keep it alive after it is
/// evicted).
struct CachedBundle {
  CachedBundle(std::string digest_in, std::string bytes_in, std::int64_t checked_at,
               store::Signatures signatures_in = {}, std::shared_ptr<const void> facts_in = {},
               std::shared_ptr<const base::FileDescriptor> file_in = {})
      : digest(std::move(digest_in)),
        bytes(std::move(bytes_in)),
        signatures(std::move(signatures_in)),
        facts(std::move(facts_in)),
        file(std::move(file_in)),
        checked_ns(checked_at) {}

  const std::string digest;  ///< SHA-256 of `bytes` (the object's name and the ETag)
  const std::string bytes;   ///< the bundle, exactly as stored
  /// The entry's signatures when it was read; the owner erases the entry
  /// whenever it adds signatures, so a kept bundle never serves stale ones.
  const store::Signatures signatures;
  /// What the owner knows of the entry besides its bytes (opaque here; the
  /// local storage keeps its EntryFacts), or null.
  const std::shared_ptr<const void> facts;
  /// The stored file holding `bytes`, kept open to send it with sendfile(2),
  /// or null.
  const std::shared_ptr<const base::FileDescriptor> file;
  /// When its owner last confirmed the bundle is still the stored one
  /// (steady clock, ns); the one mutable field, for the owner's use.
  mutable std::atomic<std::int64_t> checked_ns;
};

/// Key → bundle, least recently used evicted first. A bundle counts its
/// bytes plus a fixed overhead per entry (k_entry_overhead) against the
/// capacity, so many tiny entries are bounded too. Thread-safe (one mutex;
/// each call holds it for a lookup or an insertion, never for I/O).
class BundleCache {
 public:
  /// Bytes charged per entry on top of its bundle: the key, the digest, the
  /// list and hash nodes.
  static constexpr std::size_t k_entry_overhead = 256;

  /// Holds at most `capacity_bytes` (0 disables the cache: find() always
  /// misses, insert() keeps nothing). Bundles larger than `max_bundle_bytes`
  /// are never kept.
  BundleCache(std::size_t capacity_bytes, std::size_t max_bundle_bytes);

  /// Whether a bundle of `size` bytes would be kept by insert().
  bool admits(std::size_t size) const noexcept;

  /// The bundle kept for `key` (and marks it most recently used), or null.
  std::shared_ptr<const CachedBundle> find(const std::string& key);

  /// Keeps `bundle` for `key`, replacing what was kept for it, then evicts
  /// the least recently used entries until the total fits the capacity. A
  /// bundle that admits() refuses is not kept (and an older one for `key`
  /// is dropped).
  void insert(const std::string& key, std::shared_ptr<const CachedBundle> bundle);

  /// Drops what is kept for `key` (nothing when absent).
  void erase(const std::string& key);

  /// Bytes charged now (bundles plus overheads); at most the capacity.
  std::size_t charged_bytes() const;
  /// Entries kept now.
  std::size_t size() const;

 private:
  using Order = std::list<std::string>;  // keys, most recently used first
  struct Slot {
    std::shared_ptr<const CachedBundle> bundle;
    Order::iterator position;
  };

  static std::size_t charge(const CachedBundle& bundle) { return bundle.bytes.size() + k_entry_overhead; }
  // Removes `it` from the map and the order; the caller holds m_mutex.
  void drop(std::unordered_map<std::string, Slot>::iterator it) REQUIRES(m_mutex);

  const std::size_t m_capacity;
  const std::size_t m_max_bundle;
  mutable base::Mutex m_mutex;
  std::unordered_map<std::string, Slot> m_slots GUARDED_BY(m_mutex);
  Order m_order GUARDED_BY(m_mutex);
  std::size_t m_charged GUARDED_BY(m_mutex) = 0;
};

}  // namespace opcache::server
