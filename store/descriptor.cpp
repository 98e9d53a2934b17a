#include "store/descriptor.hpp"

#include "base/try.hpp"

namespace opcache::store {

namespace {

// The "op_type" of a descriptor that is an object with a non-empty string
// "op_type"; otherwise a usage error that starts with `origin`.
Result<std::string> checked_op_type(const nlohmann::json& descriptor, const std::string& origin) {
  if (!descriptor.is_object()) {
    return Error::usage(origin + ": a descriptor must be a JSON object");
  }
  auto op_type = descriptor.find("op_type");
  if (op_type == descriptor.end()) {
    return Error::usage(origin + ": descriptor has no \"op_type\" member (a string such as \"MatMul\")");
  }
  if (!op_type->is_string() || op_type->get_ref<const std::string&>().empty()) {
    return Error::usage(origin + ": descriptor member \"op_type\" must be a non-empty string");
  }
  return op_type->get<std::string>();
}

}  // namespace

Result<Descriptor> stored_descriptor(const nlohmann::json& normalized, const std::string& origin) {
  OPCACHE_TRY_ASSIGN(auto op_type, checked_op_type(normalized, origin));
  return Descriptor{normalized, std::move(op_type)};
}

Result<Descriptor> normalize_descriptor(nlohmann::json raw, const VolatileFieldFilter& filter,
                                        const std::string& origin) {
  OPCACHE_TRY(checked_op_type(raw, origin));
  filter.strip_in_place(raw);  // stripped where it lies: a descriptor is not copied on the hit path
  OPCACHE_TRY_ASSIGN(auto op_type, checked_op_type(raw, origin + " (after removing volatile fields)"));
  return Descriptor{std::move(raw), std::move(op_type)};
}

}  // namespace opcache::store
