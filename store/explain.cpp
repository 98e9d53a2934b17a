#include "store/explain.hpp"

#include <algorithm>

namespace opcache::store {

namespace {

using json = nlohmann::json;

bool is_plain_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// "a.b" for plain member names, else a["x.y"] (scenario extra keys hold dots).
std::string member_path(const std::string& path, const std::string& name) {
  return is_plain_name(name) ? path + "." + name : path + "[" + json(name).dump() + "]";
}

// [["k.c","9d1e…"],["k.h","…"]]: what exec keys its files, inputs and
// variables as; compared by name so that one changed file is one difference.
bool is_named_pairs(const json& value) {
  return value.is_array() && !value.empty() && std::all_of(value.begin(), value.end(), [](const json& item) {
           return item.is_array() && item.size() == 2 && item[0].is_string();
         });
}

void collect(const json* stored, const json* wanted, const std::string& path, std::vector<Difference>& out);

void collect_objects(const json& stored, const json& wanted, const std::string& path, std::vector<Difference>& out) {
  for (const auto& [name, value] : stored.items()) {
    collect(&value, wanted.contains(name) ? &wanted.at(name) : nullptr, member_path(path, name), out);
  }
  for (const auto& [name, value] : wanted.items()) {
    if (!stored.contains(name)) {
      collect(nullptr, &value, member_path(path, name), out);
    }
  }
}

void collect_named_pairs(const json& stored, const json& wanted, const std::string& path,
                         std::vector<Difference>& out) {
  auto as_object = [](const json& pairs) {
    json object = json::object();
    for (const auto& pair : pairs) {
      object[pair[0].get<std::string>()] = pair[1];
    }
    return object;
  };
  const json stored_object = as_object(stored);
  const json wanted_object = as_object(wanted);
  for (const auto& [name, value] : stored_object.items()) {
    const std::string at = path + "[" + json(name).dump() + "]";
    collect(&value, wanted_object.contains(name) ? &wanted_object.at(name) : nullptr, at, out);
  }
  for (const auto& [name, value] : wanted_object.items()) {
    if (!stored_object.contains(name)) {
      collect(nullptr, &value, path + "[" + json(name).dump() + "]", out);
    }
  }
}

void collect_arrays(const json& stored, const json& wanted, const std::string& path, std::vector<Difference>& out) {
  for (std::size_t i = 0; i < std::max(stored.size(), wanted.size()); ++i) {
    collect(i < stored.size() ? &stored[i] : nullptr, i < wanted.size() ? &wanted[i] : nullptr,
            path + "[" + std::to_string(i) + "]", out);
  }
}

void collect(const json* stored, const json* wanted, const std::string& path, std::vector<Difference>& out) {
  if (stored != nullptr && wanted != nullptr) {
    if (*stored == *wanted) {
      return;
    }
    if (stored->is_object() && wanted->is_object()) {
      return collect_objects(*stored, *wanted, path, out);
    }
    // Both equal and empty returned above, so at least one side has pairs.
    auto pairs_or_empty = [](const json& value) { return value.is_array() && (value.empty() || is_named_pairs(value)); };
    if (pairs_or_empty(*stored) && pairs_or_empty(*wanted)) {
      return collect_named_pairs(*stored, *wanted, path, out);
    }
    if (stored->is_array() && wanted->is_array()) {
      return collect_arrays(*stored, *wanted, path, out);
    }
  }
  Difference difference{path, std::nullopt, std::nullopt};
  if (stored != nullptr) {
    difference.stored = *stored;
  }
  if (wanted != nullptr) {
    difference.wanted = *wanted;
  }
  out.push_back(std::move(difference));
}

}  // namespace

std::vector<Difference> json_differences(const json& stored, const json& wanted, const std::string& path) {
  std::vector<Difference> out;
  collect(&stored, &wanted, path, out);
  std::stable_sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

std::vector<RankedCandidate> rank_candidates(const json& descriptor, const json& scenario,
                                             const std::vector<Candidate>& candidates, std::size_t limit) {
  std::vector<RankedCandidate> ranked;
  ranked.reserve(candidates.size());
  for (const auto& candidate : candidates) {
    auto differences = json_differences(candidate.descriptor, descriptor, "descriptor");
    auto in_scenario = json_differences(candidate.scenario, scenario, "scenario");
    differences.insert(differences.end(), in_scenario.begin(), in_scenario.end());
    ranked.push_back({candidate.key, candidate.scenario, std::move(differences)});
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.differences.size() != b.differences.size() ? a.differences.size() < b.differences.size() : a.key < b.key;
  });
  if (ranked.size() > limit) {
    ranked.resize(limit);
  }
  return ranked;
}

json ranked_to_json(const std::vector<RankedCandidate>& ranked) {
  json entries = json::array();
  for (const auto& entry : ranked) {
    json differences = json::array();
    for (const auto& difference : entry.differences) {
      json item{{"path", difference.path}};
      if (difference.stored) {
        item["stored"] = *difference.stored;
      }
      if (difference.wanted) {
        item["wanted"] = *difference.wanted;
      }
      differences.push_back(std::move(item));
    }
    entries.push_back({{"key", entry.key}, {"scenario", entry.scenario}, {"differences", std::move(differences)}});
  }
  return entries;
}

}  // namespace opcache::store
