// The hit journal: hits recorded without the index, folded into it later.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "base/file_io.hpp"
#include "base/mutex.hpp"
#include "opcache/result.hpp"
#include "store/cache_root.hpp"

namespace opcache::store {

/// One key's hits as one process counted them.
struct HitRecord {
  std::string key;
  std::int64_t hits = 0;
  std::int64_t last_access_ms = 0;  ///< the latest of those hits, Unix ms; 0: not kept (aging off)
  std::int64_t bytes = 0;           ///< member bytes served by them
  std::int64_t saved_ms = 0;        ///< build time they saved
};

/// A journal larger than this asks the process that wrote it to fold it (a
/// store that only ever hits would otherwise grow it without bound).
inline constexpr std::int64_t k_hit_journal_fold_bytes = 1 << 20;

/// hits.journal in the cache root (docs/formats.md "Hit journal"): one text
/// line per record, appended by readers in one write(2) each batch, under a
/// shared flock, never fsynced; writers take every line under an exclusive
/// flock, empty the file and fold the lines into the index. Lines a crash
/// tore are skipped. Process-safe and thread-safe.
class HitJournal {
 public:
  explicit HitJournal(const StoreLayout& layout) : m_layout(layout) {}

  /// Appends `records` (nothing when empty). Returns the journal's size
  /// after the write, in bytes, so the caller can fold a large one. The
  /// journal stays open for the next append.
  Result<std::int64_t> append(const std::vector<HitRecord>& records);

  /// Takes every record appended so far and empties the journal; the caller
  /// folds them into the index (and appends them again if that fails).
  /// Records of the same key are merged. An absent journal is empty.
  Result<std::vector<HitRecord>> take() const;

 private:
  // The journal opened for appending (created if missing); REQUIRES m_mutex.
  Result<int> append_fd() REQUIRES(m_mutex);

  const StoreLayout& m_layout;
  base::Mutex m_mutex;
  base::FileDescriptor m_append GUARDED_BY(m_mutex);
};

/// Adds `more`'s hits, bytes and saved time to `into` and keeps the later
/// access time (same key assumed): how a process batches its hits and how a
/// fold merges a key's lines.
void add_hits(HitRecord& into, const HitRecord& more);

/// The journal line of `record` (with its newline).
std::string format_hit_record(const HitRecord& record);

/// Parses one journal line (without its newline); false for a line that is
/// torn or malformed.
bool parse_hit_record(std::string_view line, HitRecord& record);

}  // namespace opcache::store
