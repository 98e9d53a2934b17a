// Import from and export to vendor cache layouts, through the public store API.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/environment.hpp"
#include "layouts/layout.hpp"
#include "opcache/opcache.hpp"

namespace opcache::layouts {

/// One kernel taken in (or found to be there already).
struct ImportedItem {
  std::string origin;
  std::string key;
  std::string op_type;
  std::string same_as;  ///< for duplicates: the origin stored first
};

struct ImportReport {
  Layout layout = Layout::mindspore;
  bool dry_run = false;
  std::vector<ImportedItem> imported;         ///< new entries
  std::vector<ImportedItem> duplicates;       ///< the same kernel again (another rank), stored once
  std::vector<ImportedItem> already_present;  ///< in the store before this import
  std::vector<Skipped> skipped;               ///< not taken in, with the reason
};

/// Scans `dir` (read-only: nothing in it is modified) and stores every
/// usable kernel under `scenario`. `layout` nullopt means detect it.
Result<ImportReport> import_directory(Store& store, const std::filesystem::path& dir, const Scenario& scenario,
                                      std::optional<Layout> layout, bool dry_run);

/// Where and what to export.
struct ExportOptions {
  Layout layout = Layout::mindspore;
  std::filesystem::path dir;  ///< the root; nothing is written outside it
  std::vector<int> ranks;     ///< MindSpore: rank ids to materialize (rank_<id>/kernel_meta)
  ListFilter filter;          ///< which entries
};

struct ExportReport {
  std::vector<std::string> directories;  ///< kernel directories written (torchair: one per entry)
  std::int64_t entries = 0;              ///< entries exported
  std::int64_t files_written = 0;        ///< files decompressed
  std::int64_t files_linked = 0;         ///< files hard-linked (or copied) into further ranks
  std::vector<Skipped> skipped;          ///< entries that do not fit the layout
};

/// The MindSpore destination when no DIR is given: $MS_COMPILER_CACHE_PATH
/// (else "."), and rank $RANK_ID (else 0) — or ranks 0..ranks-1 when `ranks`
/// is positive. A malformed RANK_ID is a `usage` error.
Result<ExportOptions> mindspore_destination(const std::optional<std::filesystem::path>& dir, int ranks,
                                            const base::EnvLookup& env);

/// Writes the entries matching `options.filter` in the vendor layout:
/// MindSpore `<dir>/rank_<i>/kernel_meta/<original names>` (decompressed once,
/// then hard-linked into the other ranks), or CANN
/// `<dir>/kernel_cache/<soc>/te_*.{o,json}` (.json last), every file replaced
/// atomically; or torchair, each package (*.json statistics + one .run) as a
/// new `<dir>/aclnn_static_shape_kernel_outputs/<timestamp>_<pid>_outputs/`
/// holding `<pid>/*.json` and the .run: the entry's creation time (UTC,
/// YYYYMMDDhhmmss) and a number from this process's pid up that makes the name
/// unused. It is filled under a hidden name and renamed into place complete,
/// never onto an existing name, so nothing is overwritten and a failed entry
/// leaves nothing. No symlink inside `dir` is followed. Entries that do not
/// fit the layout, or vanish or fail verification meanwhile, are skipped
/// with the reason; errors of `dir` itself (a symlink planted in it, no
/// permission) fail the export.
Result<ExportReport> export_entries(Store& store, const ExportOptions& options);

}  // namespace opcache::layouts
