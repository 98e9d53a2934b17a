#include "layouts/layout.hpp"

#include <sys/stat.h>

#include <algorithm>

namespace opcache::layouts {

namespace {

constexpr LayoutName k_layouts[] = {
    {Layout::mindspore, "mindspore"},
    {Layout::cann, "cann"},
    {Layout::torchair, "torchair"},
};

}  // namespace

std::span<const LayoutName> layout_table() noexcept { return k_layouts; }

const char* to_string(Layout layout) noexcept {
  for (const auto& row : k_layouts) {
    if (row.layout == layout) {
      return row.name;
    }
  }
  return "";
}

std::optional<Layout> parse_layout(std::string_view name) {
  for (const auto& row : k_layouts) {
    if (row.name == name) {
      return row.layout;
    }
  }
  return std::nullopt;
}

std::string relative_text(const std::filesystem::path& path, const std::filesystem::path& base) {
  auto relative = path.lexically_relative(base);
  return relative.empty() || relative.native().rfind("..", 0) == 0 ? path.string() : relative.string();
}

Listing list_directory(const std::filesystem::path& dir, const std::filesystem::path& base,
                       std::vector<Skipped>& skipped) {
  Listing listing;
  std::error_code ec;
  for (const auto& item : std::filesystem::directory_iterator(dir, ec)) {
    struct stat info {};
    if (::lstat(item.path().c_str(), &info) != 0) {
      continue;
    }
    if (S_ISLNK(info.st_mode)) {
      skipped.push_back({relative_text(item.path(), base), "is a symlink (not followed)"});
    } else if (S_ISDIR(info.st_mode)) {
      listing.directories.push_back(item.path());
    } else if (S_ISREG(info.st_mode)) {
      listing.files.push_back(item.path());
    } else {
      skipped.push_back({relative_text(item.path(), base), "is not a regular file"});
    }
  }
  if (ec) {
    skipped.push_back({relative_text(dir, base), "cannot be listed: " + ec.message()});
  }
  std::sort(listing.files.begin(), listing.files.end());
  std::sort(listing.directories.begin(), listing.directories.end());
  return listing;
}

Result<Layout> detect_layout(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Error::usage(dir.string() + " is not a directory");
  }
  if (fs::exists(dir / "aclnn_static_shape_kernel_outputs", ec)) {
    return Layout::torchair;
  }
  if (fs::exists(dir / "kernel_cache", ec) || fs::exists(dir / "op_cache.ini", ec)) {
    return Layout::cann;
  }
  // What is inside decides; a directory's own name is only a hint, since
  // "*_outputs" is also a common name for a training run's output directory.
  bool has_info = false;
  bool has_te = false;
  bool has_run = false;
  bool has_outputs = false;
  for (const auto& item : fs::directory_iterator(dir, ec)) {
    const auto name = item.path().filename().string();
    has_info = has_info || item.path().extension() == ".info" || name.rfind("rank_", 0) == 0 || name == "kernel_meta";
    has_te = has_te || name.rfind("te_", 0) == 0;
    has_run = has_run || item.path().extension() == ".run";
    std::error_code item_ec;
    has_outputs = has_outputs || (name.size() > 8 && name.compare(name.size() - 8, 8, "_outputs") == 0 &&
                                  item.is_directory(item_ec) && !item.is_symlink(item_ec));
  }
  if (has_info) {
    return Layout::mindspore;
  }
  if (has_te) {
    return Layout::cann;
  }
  // aclnn_static_shape_kernel_outputs/ holds <ts>_<pid>_outputs/ directories,
  // and each of those a static_kernel_*.run package.
  const auto own_name = (dir.has_filename() ? dir : dir.parent_path()).filename().string();
  if (own_name.find("_outputs") != std::string::npos && (has_run || has_outputs)) {
    return Layout::torchair;
  }
  return Error::usage("cannot tell the layout of " + dir.string() +
                      " (no rank_*/kernel_meta, *.info, kernel_cache, te_*, or *_outputs with a .run package);"
                      " pass --layout");
}

}  // namespace opcache::layouts
