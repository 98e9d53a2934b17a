// Vendor cache layouts on disk (MindSpore kernel_meta, CANN kernel cache,
// torchair static-kernel outputs): what can be taken in from them. The facts
// these follow are in ../shared/docs/ascend-formats.md; docs/integration.md
// shows the commands.
#pragma once

#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"

namespace opcache::layouts {

enum class Layout { mindspore, cann, torchair };

/// One row of the layout table (layout.cpp): a layout and its name, as the
/// CLI's --layout takes it and reports print it.
struct LayoutName {
  Layout layout;
  const char* name;  ///< "mindspore", "cann", "torchair"
};

/// The layout table: every Layout once, in the order --help lists them. A
/// new layout is a row here; to_string, parse_layout and the CLI's choices
/// read it. Pure; thread-safe.
std::span<const LayoutName> layout_table() noexcept;

/// The name of `layout` in the table ("" for a value without a row).
const char* to_string(Layout layout) noexcept;
/// The layout the table names `name`; nullopt for any other text.
std::optional<Layout> parse_layout(std::string_view name);

/// One kernel found on disk, ready to be stored.
struct Candidate {
  std::string origin;                      ///< where it was found, relative to the scanned directory
  std::string op_type;
  std::string descriptor_json;             ///< the descriptor to key it by
  std::vector<std::filesystem::path> files;  ///< members, in the order they must be written back
};

/// Something that was not taken in, and why.
struct Skipped {
  std::string path;
  std::string reason;
};

/// The result of scanning a directory: kernels to store and files left alone.
struct Scan {
  std::vector<Candidate> candidates;
  std::vector<Skipped> skipped;
};

/// MindSpore: DIR itself, DIR/kernel_meta, or DIR/rank_*/kernel_meta, with
/// `.o/.json/.info` triples grouped by stem. The descriptor is the compile job
/// of the `.info` (volatile fields are removed when it is keyed).
Scan scan_mindspore(const std::filesystem::path& dir);

/// CANN op compile cache (`--op_compiler_cache_dir`): `.o` + `.json` pairs in
/// DIR, DIR/<soc>/ or DIR/kernel_cache/<soc>/; the `.json`'s sha256 must match
/// the `.o`. op_cache.ini is left alone.
Scan scan_cann(const std::filesystem::path& dir);

/// torchair static kernels: each `aclnn_static_shape_kernel_outputs/<ts>_<pid>_outputs/`
/// (or such a directory given directly) becomes one entry holding its
/// per-operator statistics JSON files and its `.run` package, keyed by the
/// statistics (the operators and shapes the package was compiled for).
Scan scan_torchair(const std::filesystem::path& dir);

/// Guesses the layout of DIR; `usage` error when nothing recognisable is there.
Result<Layout> detect_layout(const std::filesystem::path& dir);

/// Lists a directory's entries; symlinks and special files are reported as
/// skipped (never followed). Sorted by name.
struct Listing {
  std::vector<std::filesystem::path> files;
  std::vector<std::filesystem::path> directories;
};
Listing list_directory(const std::filesystem::path& dir, const std::filesystem::path& base, std::vector<Skipped>& skipped);

/// `path` relative to `base`, for reports.
std::string relative_text(const std::filesystem::path& path, const std::filesystem::path& base);

}  // namespace opcache::layouts
