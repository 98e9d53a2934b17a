// CANN operator compile cache import (see ascend-formats.md, "CANN operator
// compile cache"): te_<optype>_<sha256>.o + .json pairs; the .json is the
// commit marker and carries the .o's sha256.
#include <map>

#include <nlohmann/json.hpp>

#include "layouts/layout.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"
#include "base/sha256.hpp"

namespace opcache::layouts {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// "te_<optype>_<64 hex>" -> optype; empty when the name is not of that form.
std::string op_type_from_name(const std::string& stem) {
  if (stem.rfind("te_", 0) != 0 || stem.size() < 3 + 1 + 1 + 64) {
    return {};
  }
  const auto hash = stem.substr(stem.size() - 64);
  if (!base::is_sha256_hex(hash) || stem[stem.size() - 65] != '_') {
    return {};
  }
  return stem.substr(3, stem.size() - 3 - 65);
}

// Directories that may hold kernels: DIR, DIR/<soc>, DIR/kernel_cache/<soc>.
std::vector<std::pair<fs::path, std::string>> kernel_directories(const fs::path& dir, std::vector<Skipped>& skipped) {
  std::vector<std::pair<fs::path, std::string>> found{{dir, ""}};
  auto add_socs = [&](const fs::path& parent) {
    for (const auto& soc : list_directory(parent, dir, skipped).directories) {
      if (soc.filename() != "kernel_cache") {
        found.push_back({soc, soc.filename().string()});
      }
    }
  };
  add_socs(dir);
  std::error_code ec;
  if (fs::is_directory(dir / "kernel_cache", ec) && !fs::is_symlink(dir / "kernel_cache", ec)) {
    add_socs(dir / "kernel_cache");
  }
  return found;
}

}  // namespace

Scan scan_cann(const fs::path& dir) {
  Scan scan;
  for (const auto& [kernels, soc] : kernel_directories(dir, scan.skipped)) {
    // DIR itself was listed (and its symlinks reported) by kernel_directories.
    std::vector<Skipped> already_reported;
    auto listing = list_directory(kernels, dir, kernels == dir ? already_reported : scan.skipped);
    std::map<std::string, std::map<std::string, fs::path>> by_stem;
    for (const auto& file : listing.files) {
      const auto name = file.filename().string();
      if (name == "op_cache.ini") {
        continue;  // CANN's own settings: left alone
      }
      const auto extension = file.extension().string();
      if ((extension == ".o" || extension == ".json") && !op_type_from_name(file.stem().string()).empty()) {
        by_stem[file.stem().string()][extension] = file;
      } else if (extension == ".o" || extension == ".json" || name.find(".temp") != std::string::npos) {
        scan.skipped.push_back({relative_text(file, dir), name.find(".temp") != std::string::npos
                                                              ? "an unfinished write (.temp)"
                                                              : "not named te_<optype>_<sha256>"});
      }
    }
    for (const auto& [stem, parts] : by_stem) {
      const auto origin = relative_text(kernels / stem, dir);
      if (parts.count(".json") == 0) {
        scan.skipped.push_back({origin, "no .json (the commit marker): an interrupted write"});
        continue;
      }
      if (parts.count(".o") == 0) {
        scan.skipped.push_back({origin, "no .o next to the .json"});
        continue;
      }
      auto meta_text = base::read_file(parts.at(".json"));
      auto object_bytes = base::read_file(parts.at(".o"));
      if (!meta_text || !object_bytes) {
        scan.skipped.push_back({origin, "cannot be read"});
        continue;
      }
      auto meta = base::parse_json(*meta_text, stem + ".json");
      if (!meta) {
        scan.skipped.push_back({origin, meta.error().message()});
        continue;
      }
      auto sha = meta->is_object() ? meta->find("sha256") : meta->end();
      if (!meta->is_object() || sha == meta->end() || !sha->is_string()) {
        scan.skipped.push_back({origin, stem + ".json has no \"sha256\" of its .o"});
        continue;
      }
      if (*sha != base::sha256_hex(*object_bytes)) {
        scan.skipped.push_back({origin, stem + ".o does not match the sha256 in its .json (CANN would reject it too)"});
        continue;
      }
      Candidate candidate;
      candidate.origin = origin;
      candidate.op_type = op_type_from_name(stem);
      json descriptor = {{"op_type", candidate.op_type},
                         {"framework", "cann"},
                         {"cann_kernel", stem}};
      if (!soc.empty()) {
        descriptor["soc_dir"] = soc;
      }
      candidate.descriptor_json = descriptor.dump();
      candidate.files = {parts.at(".o"), parts.at(".json")};  // .json last: it is the commit marker
      scan.candidates.push_back(std::move(candidate));
    }
  }
  return scan;
}

}  // namespace opcache::layouts
