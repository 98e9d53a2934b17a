// Why a lookup is not a hit: how stored entries of the same op type differ
// from the descriptor and scenario asked for (`opcache explain`, a server's
// POST /v1/explain). Pure functions over JSON; the callers find the
// candidates (the local index by op type, a server's storage).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace opcache::store {

/// One place where a stored entry differs from what was asked. A value that
/// is present on one side only is std::nullopt on the other.
struct Difference {
  std::string path;  ///< "descriptor.inputs[0].shape", "scenario.toolchain", "descriptor.exec.files[\"k.c\"]"
  std::optional<nlohmann::json> stored;
  std::optional<nlohmann::json> wanted;

  bool operator==(const Difference& other) const = default;
};

/// Every difference between `stored` and `wanted` below `path`, in path
/// order: objects member by member; arrays of [name, value] pairs (as
/// `opcache exec` keys its files, inputs and variables) by name; other arrays
/// element by element (a length difference is one difference per extra
/// element); any other pair of unequal values is one difference.
std::vector<Difference> json_differences(const nlohmann::json& stored, const nlohmann::json& wanted,
                                         const std::string& path);

/// A stored entry that could be compared.
struct Candidate {
  std::string key;
  nlohmann::json descriptor;  ///< as hashed (its manifest's)
  nlohmann::json scenario;    ///< as hashed
};

/// A candidate and how it differs (empty: it is the entry asked for).
struct RankedCandidate {
  std::string key;
  nlohmann::json scenario;
  std::vector<Difference> differences;
};

/// The at most `limit` candidates nearest to `descriptor` + `scenario`:
/// fewest differences first, then by key. Paths start with "descriptor."
/// or "scenario.".
std::vector<RankedCandidate> rank_candidates(const nlohmann::json& descriptor, const nlohmann::json& scenario,
                                             const std::vector<Candidate>& candidates, std::size_t limit);

/// The JSON form of ranked candidates, as POST /v1/explain answers and
/// `opcache --json explain` prints them: [{"key","scenario","differences":
/// [{"path","stored","wanted"}]}], an absent side omitted.
nlohmann::json ranked_to_json(const std::vector<RankedCandidate>& ranked);

}  // namespace opcache::store
