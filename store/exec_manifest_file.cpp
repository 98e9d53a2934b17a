#include "store/exec_manifest_file.hpp"

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::store {

namespace {

fs::path manifest_path(const StoreLayout& layout, const std::string& command_key) {
  return layout.manifests() / command_key.substr(0, 2) / (command_key + ".json");
}

}  // namespace

Result<std::optional<ExecManifest>> read_exec_manifest(const StoreLayout& layout, const std::string& command_key) {
  const auto path = manifest_path(layout, command_key);
  auto text = base::read_small_file(path, k_max_manifest_bytes);
  if (!text) {
    if (text.error().code() == ErrorCode::not_found) {
      return std::optional<ExecManifest>();
    }
    return text.error();
  }
  OPCACHE_TRY_ASSIGN(auto manifest, parse_local_exec_manifest(*text, path.string()));
  if (manifest.command_key != command_key) {
    return Error::corrupt(path.string() + ": holds the manifest of " + manifest.command_key);
  }
  return std::optional<ExecManifest>(std::move(manifest));
}

void prepare_exec_manifest_directory(const StoreLayout& layout, const std::string& command_key) {
  (void)layout.ensure_directory(manifest_path(layout, command_key).parent_path());
}

Result<ExecManifest> merge_into_exec_manifest(const StoreLayout& layout, const ExecManifest& manifest) {
  ExecManifest merged = manifest;
  auto stored = read_exec_manifest(layout, manifest.command_key);
  if (stored && *stored) {
    OPCACHE_TRY_ASSIGN(merged, merge_exec_manifests(manifest, **stored));
  }
  const auto path = manifest_path(layout, manifest.command_key);
  OPCACHE_TRY(layout.ensure_directory(path.parent_path()));
  OPCACHE_TRY(base::write_file_atomic(path, exec_manifest_to_local_json(merged), base::Durability::deferred));
  return merged;
}

}  // namespace opcache::store
