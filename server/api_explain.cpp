// POST /v1/explain (docs/protocol.md): the stored entries of a descriptor's
// op type nearest to a lookup, and how they differ (store/explain.hpp), so
// that `opcache explain` can say why a team cache has no hit.
#include "base/json_parse.hpp"
#include "server/api.hpp"
#include "store/bundle_reader.hpp"
#include "store/descriptor.hpp"
#include "store/explain.hpp"
#include "store/key.hpp"
#include "store/scenario.hpp"

namespace opcache::server {

namespace {

using json = nlohmann::json;

// How many entries of one op type a request compares at most: every one
// costs opening its bundle, a file on local storage but a GET on S3.
constexpr int k_max_local_candidates = 1000;
constexpr int k_max_remote_candidates = 100;
constexpr int k_max_limit = 50;

struct ExplainRequest {
  store::Descriptor descriptor;
  json scenario;
  std::size_t limit = 5;
};

Result<ExplainRequest> parse_explain_request(const std::string& body) {
  const std::string shape =
      "request body must be {\"descriptor\": {…}, \"scenario\": {…}, \"limit\": 1..50} (docs/protocol.md)";
  auto parsed = base::parse_json(body, "request body");
  if (!parsed) {
    return parsed.error();
  }
  if (!parsed->is_object() || !parsed->contains("descriptor") || !parsed->contains("scenario")) {
    return Error::usage(shape);
  }
  ExplainRequest request;
  auto descriptor = store::stored_descriptor((*parsed)["descriptor"], "descriptor");
  if (!descriptor) {
    return descriptor.error();
  }
  request.descriptor = std::move(*descriptor);
  // A scenario as hashed is complete: no field comes from this server's environment.
  auto scenario = store::scenario_from_json((*parsed)["scenario"], "scenario", [](const char*) {
    return std::optional<std::string>();
  });
  if (!scenario) {
    return scenario.error();
  }
  request.scenario = store::scenario_to_json(*scenario);
  if (auto limit = parsed->find("limit"); limit != parsed->end()) {
    if (!limit->is_number_integer() || limit->get<std::int64_t>() < 1 || limit->get<std::int64_t>() > k_max_limit) {
      return Error::usage(shape);
    }
    request.limit = limit->get<std::size_t>();
  }
  return request;
}

// The descriptor and scenario of a stored bundle, from its manifest.
std::optional<store::Candidate> read_candidate(Storage& storage, const std::string& key) {
  auto bundle = storage.open(key);
  if (!bundle || !*bundle) {
    return std::nullopt;
  }
  auto& opened = **bundle;
  std::unique_ptr<base::ByteSource> source;
  if (opened.memory) {
    source = std::make_unique<base::MemorySource>(*opened.memory);
  } else {
    source = std::make_unique<base::FdSource>(opened.fd.get(), key);
  }
  store::BundleReader reader(*source, {}, store::KeyCheck::trust_digest);
  auto manifest = reader.read_manifest();
  if (!manifest || manifest->key != key) {
    return std::nullopt;
  }
  return store::Candidate{key, manifest->descriptor, manifest->scenario};
}

}  // namespace

ApiResponse Api::explain(const std::string& body) {
  auto request = parse_explain_request(body);
  if (!request) {
    return error_response(400, "bad_request", request.error().message());
  }
  auto key = store::derive_key(request->descriptor.normalized, request->scenario);
  if (!key) {
    return error_response(400, "bad_request", key.error().message());
  }
  const int budget = m_storage.reads_are_local() ? k_max_local_candidates : k_max_remote_candidates;
  std::vector<store::Candidate> candidates;
  ListQuery query;
  query.op_type = request->descriptor.op_type;
  query.limit = std::min(budget, 1000);
  while (static_cast<int>(candidates.size()) < budget) {
    auto page = m_storage.list(query);
    if (!page) {
      return storage_failure(page.error());
    }
    for (const auto& entry : page->entries) {
      if (auto candidate = read_candidate(m_storage, entry.key)) {
        candidates.push_back(std::move(*candidate));
      }
    }
    if (page->next.empty()) {
      break;
    }
    query.after = page->next;
  }
  const auto ranked = store::rank_candidates(request->descriptor.normalized, request->scenario, candidates,
                                             request->limit);
  const bool exact = !ranked.empty() && ranked.front().differences.empty();
  return json_response(200, {{"key", *key},
                             {"exact", exact},
                             {"compared", candidates.size()},
                             {"nearest", store::ranked_to_json(ranked)}});
}

}  // namespace opcache::server
