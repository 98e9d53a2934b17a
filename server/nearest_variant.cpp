#include "server/nearest_variant.hpp"

#include <map>
#include <optional>
#include <string>

#include "store/explain.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

constexpr int k_max_listed = 1000;

// How many stored entries of `op_type` there are per scenario (as JSON text),
// from at most k_max_listed listed entries; std::nullopt on a storage error.
std::optional<std::map<std::string, int>> scenarios_of(Storage& storage, const std::string& op_type) {
  std::map<std::string, int> counts;
  ListQuery query;
  query.op_type = op_type;
  query.limit = k_max_listed;
  for (int listed = 0; listed < k_max_listed;) {
    auto page = storage.list(query);
    if (!page) {
      return std::nullopt;
    }
    for (const auto& entry : page->entries) {
      ++counts[entry.scenario.dump()];
    }
    listed += static_cast<int>(page->entries.size());
    if (page->next.empty() || page->entries.empty()) {
      break;
    }
    query.after = page->next;
  }
  return counts;
}

json nearest_variant(const std::map<std::string, int>& counts, const json& wanted) {
  json best = nullptr;
  std::size_t best_differences = 0;
  int best_entries = 0;
  for (const auto& [text, entries] : counts) {
    const json stored = json::parse(text);
    const auto differences = store::json_differences(stored, wanted, "scenario");
    const bool better = best.is_null() || differences.size() < best_differences ||
                        (differences.size() == best_differences && entries > best_entries);
    if (better) {
      store::RankedCandidate ranked{"", stored, differences};
      const json as_json = store::ranked_to_json({ranked}).at(0);
      best = {{"scenario", stored}, {"differences", as_json["differences"]}, {"entries", entries}};
      best_differences = differences.size();
      best_entries = entries;
    }
  }
  return best;
}

}  // namespace

void add_nearest_variants(json& misses, Storage& storage) {
  if (!misses.contains("groups") || !misses["groups"].is_array()) {
    return;
  }
  std::map<std::string, std::optional<std::map<std::string, int>>> listed;  // one listing per op type
  for (auto& group : misses["groups"]) {
    if (!group["op_type"].is_string() || !group["scenario"].is_object()) {
      continue;
    }
    const auto op_type = group["op_type"].get<std::string>();
    auto found = listed.find(op_type);
    if (found == listed.end()) {
      found = listed.emplace(op_type, scenarios_of(storage, op_type)).first;
    }
    if (found->second) {
      group["nearest"] = nearest_variant(*found->second, group["scenario"]);
    }
  }
}

}  // namespace opcache::server
