// Store::explain: the stored entries nearest to a lookup, and how they differ
// (store/explain.hpp ranks them), locally and on each remote that can answer.
#include <algorithm>
#include <string>
#include <vector>

#include "api/store_impl.hpp"
#include "base/try.hpp"
#include "store/explain.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"

namespace opcache {

namespace {

using json = nlohmann::json;

// How many entries of one op type are compared at most (newest keys are not
// favoured: the index lists by key).
constexpr std::int64_t k_max_candidates = 1000;

std::optional<std::string> as_text(const std::optional<json>& value) {
  return value ? std::optional<std::string>(value->dump()) : std::nullopt;
}

NearEntry near_entry(const store::RankedCandidate& ranked, const std::string& where) {
  NearEntry entry{ranked.key, where, ranked.scenario.dump(), {}};
  for (const auto& difference : ranked.differences) {
    entry.differences.push_back({difference.path, as_text(difference.stored), as_text(difference.wanted)});
  }
  return entry;
}

// The local entries of `op_type`, as candidates (entries whose manifest
// cannot be read are left out: verify reports them).
Result<std::vector<store::Candidate>> local_candidates(store::LocalStore& local, const std::string& op_type) {
  ListFilter filter;
  filter.op_type = op_type;
  filter.limit = k_max_candidates;
  OPCACHE_TRY_ASSIGN(auto entries, local.list(filter));
  std::vector<store::Candidate> candidates;
  for (const auto& entry : entries) {
    auto manifest = local.read_manifest(entry.key);
    if (manifest && *manifest) {
      candidates.push_back({entry.key, (*manifest)->descriptor, (*manifest)->scenario});
    }
  }
  return candidates;
}

// The nearest entries a server reports, from its POST /v1/explain answer
// (docs/protocol.md); an answer of another shape is an error.
Result<std::vector<NearEntry>> remote_nearest(const std::string& answer, const std::string& where, bool& exact) {
  auto parsed = json::parse(answer, nullptr, false);
  auto nearest = parsed.is_object() ? parsed.find("nearest") : parsed.end();
  if (nearest == parsed.end() || !nearest->is_array()) {
    return Error::remote(where + ": malformed /v1/explain answer");
  }
  exact = exact || (parsed.contains("exact") && parsed["exact"].is_boolean() && parsed["exact"].get<bool>());
  std::vector<NearEntry> entries;
  for (const auto& item : *nearest) {
    if (!item.is_object() || !item.contains("key") || !item["key"].is_string() || !item.contains("differences") ||
        !item["differences"].is_array()) {
      return Error::remote(where + ": malformed /v1/explain answer");
    }
    NearEntry entry{item["key"].get<std::string>(), where, item.value("scenario", json::object()).dump(), {}};
    for (const auto& difference : item["differences"]) {
      if (!difference.is_object() || !difference.contains("path") || !difference["path"].is_string()) {
        return Error::remote(where + ": malformed /v1/explain answer");
      }
      auto side = [&difference](const char* name) {
        return difference.contains(name) ? std::optional<std::string>(difference[name].dump()) : std::nullopt;
      };
      entry.differences.push_back({difference["path"].get<std::string>(), side("stored"), side("wanted")});
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

// Asks every remote that has a server; what one could not answer goes to
// `explanation.unanswered`, never fails the whole explanation.
void explain_on_remotes(const remote::RemoteSet& remotes, const json& request, Explanation& explanation) {
  for (const auto& remote : remotes.remotes()) {
    const std::string where = remote.store->name();
    auto* explainer = remote.store->explainer();
    if (explainer == nullptr) {
      explanation.unanswered.push_back(where + ": no server to compare with (plain storage)");
      continue;
    }
    auto answer = explainer->explain(request.dump());
    auto nearest = answer ? remote_nearest(*answer, where, explanation.exact) : Result<std::vector<NearEntry>>(answer.error());
    if (!nearest) {
      explanation.unanswered.push_back(where + ": " + nearest.error().message());
      continue;
    }
    explanation.nearest.insert(explanation.nearest.end(), nearest->begin(), nearest->end());
  }
}

}  // namespace

Result<Explanation> Store::explain(std::string_view descriptor_json, const Scenario& scenario, std::size_t limit) {
  OPCACHE_TRY_ASSIGN(auto descriptor, m_impl->descriptor(descriptor_json));
  const json scenario_json = store::scenario_to_json(scenario);
  Explanation explanation;
  OPCACHE_TRY_ASSIGN(explanation.key, store::derive_key(descriptor.normalized, scenario_json));
  OPCACHE_TRY_ASSIGN(auto candidates, local_candidates(*m_impl->local, descriptor.op_type));
  for (const auto& ranked : store::rank_candidates(descriptor.normalized, scenario_json, candidates, limit)) {
    explanation.exact = explanation.exact || ranked.differences.empty();
    explanation.nearest.push_back(near_entry(ranked, "local"));
  }
  if (m_impl->remotes) {
    const json request{{"descriptor", descriptor.normalized},
                       {"scenario", scenario_json},
                       {"limit", std::min<std::size_t>(limit, 50)}};
    explain_on_remotes(*m_impl->remotes, request, explanation);
  }
  return explanation;
}

}  // namespace opcache
