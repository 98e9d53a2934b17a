#include "store/exec_manifest.hpp"

#include <algorithm>
#include <map>

#include "base/canonical_json.hpp"
#include "base/json_parse.hpp"
#include "base/sha256.hpp"
#include "base/try.hpp"
#include "base/utf8.hpp"
#include "store/exec_manifest_scan.hpp"

namespace opcache::store {

namespace {

using json = nlohmann::json;

constexpr std::size_t k_max_path_bytes = 4096;
constexpr std::size_t k_max_inputs = 100000;
constexpr std::size_t k_max_outputs = 10000;

bool is_state(const std::string& state) {
  auto digest_after = [&state](std::string_view prefix) {
    return state.size() == prefix.size() + 64 && state.compare(0, prefix.size(), prefix) == 0 &&
           base::is_sha256_hex(std::string_view(state).substr(prefix.size()));
  };
  return state == "absent" || digest_after("sha256:") || digest_after("dir:");
}

// Whether `path` (starting with '/') has only normal components: none empty,
// "." or "..", none holding a NUL. One pass over its bytes (a hit checks every
// input of a local manifest).
bool has_normal_components(std::string_view path) {
  const char* start = path.data() + 1;  // of the current component
  const char* const end = path.data() + path.size();
  for (const char* p = start;; ++p) {
    if (p == end || *p == '/') {
      const auto length = static_cast<std::size_t>(p - start);
      if (length == 0 || (length <= 2 && start[0] == '.' && (length == 1 || start[1] == '.'))) {
        return false;
      }
      if (p == end) {
        return true;
      }
      start = p + 1;
    } else if (*p == '\0') {
      return false;
    }
  }
}

// An input path: absolute, or below one of the markers; no "." or ".."
// component, no empty component, no NUL, valid UTF-8.
bool is_input_path(const std::string& path) {
  if (path.empty() || path.size() > k_max_path_bytes || !base::is_valid_utf8(path)) {
    return false;
  }
  std::string_view rest = path;
  if (rest.front() == '{') {
    for (std::string_view marker : {"{out}", "{base}", "{cann}"}) {
      if (rest == marker) {
        return true;
      }
      if (rest.starts_with(marker) && rest[marker.size()] == '/') {
        rest.remove_prefix(marker.size());
        break;
      }
    }
  }
  return rest.front() == '/' && (rest == "/" || has_normal_components(rest));
}

bool is_member_name(const std::string& name) {
  return !name.empty() && name.size() <= 255 && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos && base::is_valid_utf8(name);
}

json input_to_json(const ObservedInput& input) {
  json item = json::array({input.path, input.state});
  if (!input.ignored.empty()) {
    item.push_back(input.ignored);
  }
  return item;
}

// One input's path, state and ignored names, as every manifest must have them.
Status vet_input(const ObservedInput& input) {
  if (!is_input_path(input.path)) {
    return Error::corrupt("input path \"" + input.path.substr(0, 200) + "\" is not absolute and normal");
  }
  if (!is_state(input.state)) {
    return Error::corrupt("input " + input.path + " has state \"" + input.state.substr(0, 80) +
                          "\" (expected sha256:<hex>, dir:<hex> or absent)");
  }
  if (input.ignored.empty()) {
    return {};
  }
  if (input.state.rfind("dir:", 0) != 0 || input.ignored.size() > k_max_outputs) {
    return Error::corrupt("input " + input.path + ": only a listed directory has a list of ignored names");
  }
  for (std::size_t i = 0; i < input.ignored.size(); ++i) {
    if (!is_member_name(input.ignored[i]) || (i > 0 && !(input.ignored[i - 1] < input.ignored[i]))) {
      return Error::corrupt("input " + input.path + ": ignored names must be sorted file names, each once");
    }
  }
  return {};
}

// Whether a build's file input has the path `path`.
bool is_file_input(const ManifestBuild& build, const std::string& path) {
  const auto found = std::lower_bound(build.inputs.begin(), build.inputs.end(), path,
                                      [](const ObservedInput& input, const std::string& p) { return input.path < p; });
  return found != build.inputs.end() && found->path == path && found->state.starts_with("sha256:");
}

// The `seen` member of a local build as it is written, or nothing when it is
// not an object of strings (a hint: dropped, never refused).
std::map<std::string, std::string> seen_from_json(const json& value) {
  std::map<std::string, std::string> seen;
  const auto member = value.find("seen");
  if (member == value.end() || !member->is_object()) {
    return seen;
  }
  for (const auto& [path, identity] : member->items()) {
    if (!identity.is_string()) {
      return {};
    }
    seen.emplace(path, identity.get<std::string>());
  }
  return seen;
}

json build_to_json(const ManifestBuild& build, bool local) {
  json inputs = json::array();
  for (const auto& input : build.inputs) {
    inputs.push_back(input_to_json(input));
  }
  json value{{"entry", build.entry}, {"created", build.created}, {"outputs", build.outputs}, {"inputs", inputs}};
  if (local && !build.seen.empty()) {
    value["seen"] = build.seen;
  }
  return value;
}

// One input as written: [path, state] or [path, state, ignored names].
Result<ObservedInput> input_from_json(const json& item) {
  if (!item.is_array() || item.size() < 2 || item.size() > 3 || !item[0].is_string() || !item[1].is_string()) {
    return Error::corrupt("an input must be [path, state] or [path, state, ignored names]");
  }
  ObservedInput input{item[0], item[1], {}};
  if (item.size() == 3) {
    if (input.state.rfind("dir:", 0) != 0 || !item[2].is_array() || item[2].size() > k_max_outputs) {
      return Error::corrupt("input " + input.path + ": only a listed directory has a list of ignored names");
    }
    for (const auto& name : item[2]) {
      if (!name.is_string()) {
        return Error::corrupt("input " + input.path + ": ignored names must be sorted file names, each once");
      }
      input.ignored.push_back(name);
    }
  }
  return input;
}

Result<ManifestBuild> build_from_json(const json& value, const std::string& where, bool local) {
  auto refuse = [&where](const std::string& why) { return Error::corrupt(where + ": " + why); };
  if (!value.is_object()) {
    return refuse("a build must be an object");
  }
  ManifestBuild build;
  const auto entry = value.find("entry");
  if (entry == value.end() || !entry->is_string()) {
    return refuse("\"entry\" must be a key (64 lowercase hex digits)");
  }
  build.entry = *entry;
  if (auto created = value.find("created"); created != value.end() && created->is_string()) {
    build.created = *created;
  }
  const auto outputs = value.find("outputs");
  if (outputs == value.end() || !outputs->is_array() || outputs->size() > k_max_outputs) {
    return refuse("\"outputs\" must be an array of at most " + std::to_string(k_max_outputs) + " names");
  }
  for (const auto& name : *outputs) {
    if (!name.is_string()) {
      return refuse("an output must be a file name without '/'");
    }
    build.outputs.push_back(name);
  }
  const auto inputs = value.find("inputs");
  if (inputs == value.end() || !inputs->is_array() || inputs->size() > k_max_inputs) {
    return refuse("\"inputs\" must be an array of at most " + std::to_string(k_max_inputs) + " inputs");
  }
  for (const auto& item : *inputs) {
    auto input = input_from_json(item);
    if (!input) {
      return refuse(input.error().message());
    }
    build.inputs.push_back(std::move(*input));
  }
  if (local) {
    build.seen = seen_from_json(value);
  }
  auto vetted = vet_manifest_build(build);
  if (!vetted) {
    return refuse(vetted.error().message());
  }
  return build;
}

std::string manifest_to_json(const ExecManifest& manifest, bool local) {
  json builds = json::array();
  for (const auto& build : manifest.builds) {
    builds.push_back(build_to_json(build, local));
  }
  json document = json::object();
  document["format"] = "opcache-exec-manifest";
  document["version"] = k_exec_manifest_version;
  document["command_key"] = manifest.command_key;
  document["builds"] = std::move(builds);
  return document.dump();
}

Result<ExecManifest> parse_manifest(std::string_view text, const std::string& origin, bool local) {
  if (text.size() > k_max_manifest_bytes) {
    return Error::corrupt(origin + ": an exec manifest of " + std::to_string(text.size()) + " bytes is over the limit of " +
                          std::to_string(k_max_manifest_bytes));
  }
  auto parsed = base::parse_json(text, origin);
  if (!parsed) {
    return Error::corrupt(parsed.error().message());
  }
  const json& document = *parsed;
  if (!document.is_object() || document.value("format", std::string()) != "opcache-exec-manifest") {
    return Error::corrupt(origin + ": not an exec manifest (\"format\" must be \"opcache-exec-manifest\")");
  }
  const auto version = document.find("version");
  if (version == document.end() || !version->is_number_integer() || *version != k_exec_manifest_version) {
    return Error::corrupt(origin + ": exec manifest version " + (version == document.end() ? "missing" : version->dump()) +
                          " is not supported (this opcache reads version " +
                          std::to_string(k_exec_manifest_version) + ")");
  }
  ExecManifest manifest;
  const auto command_key = document.find("command_key");
  if (command_key == document.end() || !command_key->is_string() ||
      !base::is_sha256_hex(command_key->get_ref<const std::string&>())) {
    return Error::corrupt(origin + ": \"command_key\" must be 64 lowercase hex digits");
  }
  manifest.command_key = *command_key;
  const auto builds = document.find("builds");
  if (builds == document.end() || !builds->is_array() || builds->size() > k_max_manifest_builds) {
    return Error::corrupt(origin + ": \"builds\" must be an array of at most " +
                          std::to_string(k_max_manifest_builds) + " builds");
  }
  for (std::size_t i = 0; i < builds->size(); ++i) {
    OPCACHE_TRY_ASSIGN(auto build,
                       build_from_json((*builds)[i], origin + " builds[" + std::to_string(i) + "]", local));
    manifest.builds.push_back(std::move(build));
  }
  return manifest;
}

}  // namespace

Status vet_manifest_build(ManifestBuild& build) {
  if (!base::is_sha256_hex(build.entry)) {
    return Error::corrupt("\"entry\" must be a key (64 lowercase hex digits)");
  }
  if (build.outputs.size() > k_max_outputs) {
    return Error::corrupt("\"outputs\" must be an array of at most " + std::to_string(k_max_outputs) + " names");
  }
  if (!std::all_of(build.outputs.begin(), build.outputs.end(), is_member_name)) {
    return Error::corrupt("an output must be a file name without '/'");
  }
  if (build.inputs.size() > k_max_inputs) {
    return Error::corrupt("\"inputs\" must be an array of at most " + std::to_string(k_max_inputs) + " inputs");
  }
  const ObservedInput* previous = nullptr;
  for (const auto& input : build.inputs) {
    OPCACHE_TRY(vet_input(input));
    if (previous != nullptr && !(previous->path < input.path)) {
      return Error::corrupt("inputs must be sorted by path, each path once (at " + input.path + ")");
    }
    previous = &input;
  }
  const bool seen_names_inputs = std::all_of(build.seen.begin(), build.seen.end(), [&build](const auto& seen) {
    return is_file_input(build, seen.first);
  });
  if (!seen_names_inputs) {
    build.seen.clear();
  }
  return {};
}

std::string exec_manifest_to_json(const ExecManifest& manifest) { return manifest_to_json(manifest, false); }

std::string exec_manifest_to_local_json(const ExecManifest& manifest) { return manifest_to_json(manifest, true); }

Result<ExecManifest> parse_exec_manifest(std::string_view text, const std::string& origin) {
  return parse_manifest(text, origin, false);
}

Result<ExecManifest> parse_local_exec_manifest(std::string_view text, const std::string& origin) {
  if (auto scanned = scan_local_exec_manifest(text)) {
    return std::move(*scanned);
  }
  return parse_manifest(text, origin, true);
}

ExecManifest add_manifest_build(ExecManifest manifest, ManifestBuild build) {
  std::erase_if(manifest.builds, [&build](const ManifestBuild& old) { return old.entry == build.entry; });
  manifest.builds.insert(manifest.builds.begin(), std::move(build));
  if (manifest.builds.size() > k_max_manifest_builds) {
    manifest.builds.resize(k_max_manifest_builds);
  }
  return manifest;
}

Result<ExecManifest> merge_exec_manifests(const ExecManifest& newer, const ExecManifest& older) {
  if (newer.command_key != older.command_key) {
    return Error::usage("cannot merge the exec manifests of two command keys (" + newer.command_key + ", " +
                        older.command_key + ")");
  }
  ExecManifest merged{newer.command_key, {}};
  std::map<std::string, std::size_t> at;  // entry -> its build in merged
  for (const auto* manifest : {&newer, &older}) {
    for (const auto& build : manifest->builds) {
      if (const auto found = at.find(build.entry); found != at.end()) {
        auto& kept = merged.builds[found->second];
        if (kept.inputs == build.inputs) {  // a foreign build naming the entry gains no identity seen here
          kept.seen.insert(build.seen.begin(), build.seen.end());  // keeps the newer's own
        }
      } else if (merged.builds.size() < k_max_manifest_builds) {
        at.emplace(build.entry, merged.builds.size());
        merged.builds.push_back(build);
      }
    }
  }
  return merged;
}

std::string observed_inputs_digest(const std::vector<ObservedInput>& inputs) {
  json list = json::array();
  for (const auto& input : inputs) {
    list.push_back(input_to_json(input));
  }
  // Strings only: canonical JSON cannot fail on them.
  return base::sha256_hex(base::canonical_json(list).value());
}

}  // namespace opcache::store
