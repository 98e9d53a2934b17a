#include "store/cache_root.hpp"

#include "base/file_io.hpp"
#include "base/try.hpp"

namespace opcache::store {

Result<CacheRoot> resolve_cache_root(const std::optional<fs::path>& flag, const EnvLookup& env) {
  if (flag && !flag->empty()) {
    return CacheRoot{*flag, "--cache-dir"};
  }
  auto non_empty = [&env](const char* name) {
    auto value = env(name);
    return value && !value->empty() ? value : std::nullopt;
  };
  if (auto dir = non_empty("OPCACHE_DIR")) {
    return CacheRoot{*dir, "OPCACHE_DIR"};
  }
  if (auto xdg = non_empty("XDG_CACHE_HOME")) {
    return CacheRoot{fs::path(*xdg) / "opcache", "XDG_CACHE_HOME"};
  }
  if (auto home = non_empty("HOME")) {
    return CacheRoot{fs::path(*home) / ".cache" / "opcache", "HOME"};
  }
  return Error::usage("no cache directory: pass --cache-dir DIR or set OPCACHE_DIR (HOME is not set either)");
}

Status StoreLayout::create_directories() const {
  for (const auto& directory : {m_root, objects(), tmp(), locks()}) {
    OPCACHE_TRY(base::ensure_directory(directory));
  }
  return {};
}

}  // namespace opcache::store
