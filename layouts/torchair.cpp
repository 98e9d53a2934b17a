// torchair static-kernel output trees (see seed 003 and ascend-formats.md):
// aclnn_static_shape_kernel_outputs/<ts>_<pid>_outputs/{<pid>/*.json, <pid>_debug/, static_kernel_*.run}.
#include <nlohmann/json.hpp>

#include "layouts/layout.hpp"
#include "base/file_io.hpp"
#include "base/json_parse.hpp"

namespace opcache::layouts {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// Turns one <ts>_<pid>_outputs directory into a candidate, or says why not.
std::optional<std::string> make_candidate(const fs::path& outputs, const fs::path& base, std::vector<Skipped>& skipped,
                                          Candidate& candidate) {
  auto listing = list_directory(outputs, base, skipped);
  std::vector<fs::path> packages;
  for (const auto& file : listing.files) {
    if (file.extension() == ".run") {
      packages.push_back(file);
    }
  }
  if (packages.size() != 1) {
    return packages.empty() ? "no static_kernel_*.run package" : "more than one .run package";
  }
  // The statistics directory is the one not ending in "_debug" (the debug
  // copy lists every operator of the model, not the compiled ones).
  std::optional<fs::path> statistics;
  for (const auto& sub : listing.directories) {
    const auto name = sub.filename().string();
    if (name.size() < 6 || name.compare(name.size() - 6, 6, "_debug") != 0) {
      statistics = sub;
    }
  }
  if (!statistics) {
    return "no per-operator statistics directory (<pid>/)";
  }
  auto stats_listing = list_directory(*statistics, base, skipped);
  json operators = json::array();
  std::vector<fs::path> stats_files;
  for (const auto& file : stats_listing.files) {
    if (file.extension() != ".json") {
      continue;
    }
    auto text = base::read_file(file);
    if (!text) {
      return "cannot read " + relative_text(file, base);
    }
    auto parsed = base::parse_json(*text, relative_text(file, base));
    if (!parsed) {
      return parsed.error().message();
    }
    operators.push_back({{"file", file.filename().string()}, {"statistics", *parsed}});
    stats_files.push_back(file);
  }
  if (stats_files.empty()) {
    return "the statistics directory holds no .json files";
  }
  candidate.origin = relative_text(outputs, base);
  candidate.op_type = "TorchairStaticKernels";
  candidate.descriptor_json =
      json{{"op_type", candidate.op_type}, {"framework", "torchair"}, {"operators", operators}}.dump();
  candidate.files = stats_files;
  candidate.files.push_back(packages.front());
  return std::nullopt;
}

}  // namespace

Scan scan_torchair(const fs::path& dir) {
  Scan scan;
  std::vector<fs::path> output_dirs;
  const fs::path root = dir / "aclnn_static_shape_kernel_outputs";
  std::error_code ec;
  if (dir.filename().string().find("_outputs") != std::string::npos && dir.filename() != "aclnn_static_shape_kernel_outputs") {
    output_dirs.push_back(dir);
  } else {
    const fs::path parent = fs::is_directory(root, ec) ? root : dir;
    for (const auto& sub : list_directory(parent, dir, scan.skipped).directories) {
      if (sub.filename().string().find("_outputs") != std::string::npos) {
        output_dirs.push_back(sub);
      }
    }
  }
  for (const auto& outputs : output_dirs) {
    Candidate candidate;
    if (auto reason = make_candidate(outputs, dir, scan.skipped, candidate)) {
      scan.skipped.push_back({relative_text(outputs, dir), *reason});
      continue;
    }
    scan.candidates.push_back(std::move(candidate));
  }
  return scan;
}

}  // namespace opcache::layouts
