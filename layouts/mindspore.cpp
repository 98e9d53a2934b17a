// MindSpore kernel_meta import (see ascend-formats.md, "MindSpore kernel_meta").
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

// The directories holding kernels: DIR itself, DIR/kernel_meta, DIR/rank_*/kernel_meta.
std::vector<fs::path> kernel_meta_directories(const fs::path& dir, std::vector<Skipped>& skipped) {
  std::vector<fs::path> found;
  auto listing = list_directory(dir, dir, skipped);
  for (const auto& file : listing.files) {
    auto extension = file.extension();
    if (extension == ".info" || extension == ".o" || extension == ".json") {
      found.push_back(dir);
      break;
    }
  }
  for (const auto& sub : listing.directories) {
    const auto name = sub.filename().string();
    if (name == "kernel_meta") {
      found.push_back(sub);
    } else if (name.rfind("rank_", 0) == 0) {
      auto rank = list_directory(sub, dir, skipped);
      for (const auto& inner : rank.directories) {
        if (inner.filename() == "kernel_meta") {
          found.push_back(inner);
        }
      }
    }
  }
  return found;
}

// The op type of a compile job: the non-Data ops of its op_list, joined by '+'.
std::string op_type_of(const json& job) {
  std::string type;
  auto list = job.find("op_list");
  if (list == job.end() || !list->is_array()) {
    return type;
  }
  for (const auto& op : *list) {
    auto kind = op.find("type");
    if (op.is_object() && kind != op.end() && kind->is_string() && *kind != "Data") {
      type += (type.empty() ? "" : "+") + kind->get<std::string>();
    }
  }
  return type;
}

// Checks a triple and builds its candidate; returns the reason when it is unusable.
std::optional<std::string> make_candidate(const fs::path& meta, const std::string& stem, const fs::path& base,
                                          Candidate& candidate) {
  const fs::path object = meta / (stem + ".o");
  const fs::path metadata = meta / (stem + ".json");
  const fs::path info = meta / (stem + ".info");
  auto info_text = base::read_file(info);
  if (!info_text) {
    return "cannot read the .info: " + info_text.error().message();
  }
  auto info_json = base::parse_json(*info_text, stem + ".info");
  if (!info_json) {
    return info_json.error().message();
  }
  auto job = info_json->is_object() ? info_json->find("job_content") : info_json->end();
  if (!info_json->is_object() || job == info_json->end() || !job->is_object()) {
    return stem + ".info has no \"job_content\" object (not a MindSpore compile job)";
  }
  const std::string op_type = op_type_of(*job);
  if (op_type.empty()) {
    return stem + ".info names no operator type in job_content.op_list";
  }
  auto meta_text = base::read_file(metadata);
  if (!meta_text) {
    return "cannot read the .json: " + meta_text.error().message();
  }
  auto meta_json = base::parse_json(*meta_text, stem + ".json");
  if (!meta_json) {
    return meta_json.error().message();
  }
  if (!meta_json->is_object()) {
    return stem + ".json is not a JSON object";
  }
  if (auto sha = meta_json->find("sha256"); sha != meta_json->end()) {
    auto object_bytes = base::read_file(object);
    if (!object_bytes) {
      return "cannot read the .o: " + object_bytes.error().message();
    }
    if (!sha->is_string() || *sha != base::sha256_hex(*object_bytes)) {
      return stem + ".o does not match the sha256 in " + stem + ".json (a torn or altered kernel)";
    }
  }
  candidate.origin = relative_text(meta / stem, base);
  candidate.op_type = op_type;
  candidate.descriptor_json = json{{"op_type", op_type}, {"framework", "mindspore"}, {"job", *job}}.dump();
  candidate.files = {object, metadata, info};
  return std::nullopt;
}

}  // namespace

Scan scan_mindspore(const fs::path& dir) {
  Scan scan;
  for (const auto& meta : kernel_meta_directories(dir, scan.skipped)) {
    auto listing = list_directory(meta, dir, scan.skipped);
    std::map<std::string, std::map<std::string, fs::path>> by_stem;  // stem -> extension -> file
    for (const auto& file : listing.files) {
      const auto extension = file.extension().string();
      if (extension == ".o" || extension == ".json" || extension == ".info") {
        by_stem[file.stem().string()][extension] = file;
      } else {
        scan.skipped.push_back({relative_text(file, dir), "not part of a .o/.json/.info triple"});
      }
    }
    for (const auto& [stem, parts] : by_stem) {
      std::string missing;
      for (const char* extension : {".o", ".json", ".info"}) {
        if (parts.count(extension) == 0) {
          missing += (missing.empty() ? "" : ", ") + std::string(extension);
        }
      }
      if (!missing.empty()) {
        scan.skipped.push_back({relative_text(meta / stem, dir), "partial triple: missing " + missing});
        continue;
      }
      Candidate candidate;
      if (auto reason = make_candidate(meta, stem, dir, candidate)) {
        scan.skipped.push_back({relative_text(meta / stem, dir), *reason});
        continue;
      }
      scan.candidates.push_back(std::move(candidate));
    }
  }
  return scan;
}

}  // namespace opcache::layouts
