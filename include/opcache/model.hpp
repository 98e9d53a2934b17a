// opcache — model op lists: the operators of a network, as one JSON file.
//
//   {"name": "resnet50", "description": "...", "source": "...", "ops": [{descriptor}, ...]}
//
// Each op is an op descriptor object with an optional instance "name" (the
// op's name in the network, not part of its kernel). examples/models/ holds
// real ones; refcc compiles them and `opcache pull --keys` keys them.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "opcache/result.hpp"

namespace opcache {

/// One op of a model.
struct ModelOp {
  std::string name;             ///< the op's instance "name"; empty when it has none
  std::string descriptor_json;  ///< the op as written, without "name" (compact JSON)
};

/// A parsed model op list.
struct ModelOpList {
  std::string name;         ///< the "name" member; empty when absent
  std::string description;  ///< the "description" member; empty when absent
  std::vector<ModelOp> ops;  ///< in file order, at least one
};

/// Parses a model op list. Strict: the text must be a JSON object whose only
/// members are "name", "description", "source" (strings) and "ops" (a
/// non-empty array of objects, each with an optional string "name"). Checks
/// the shape only, not the descriptors themselves (Store::key and refcc do).
/// Errors: `usage`, starting with `origin` and naming the member or the op
/// index ("models/x.json: ops[3]: ..."). Pure; thread-safe.
Result<ModelOpList> parse_model_op_list(std::string_view json_text, const std::string& origin);

}  // namespace opcache
