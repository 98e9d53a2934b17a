#include "store/descriptor.hpp"

#include "base/try.hpp"

namespace opcache::store {

Result<Descriptor> stored_descriptor(const nlohmann::json& normalized, const std::string& origin) {
  if (!normalized.is_object()) {
    return Error::usage(origin + ": a descriptor must be a JSON object");
  }
  auto op_type = normalized.find("op_type");
  if (op_type == normalized.end()) {
    return Error::usage(origin + ": descriptor has no \"op_type\" member (a string such as \"MatMul\")");
  }
  if (!op_type->is_string() || op_type->get_ref<const std::string&>().empty()) {
    return Error::usage(origin + ": descriptor member \"op_type\" must be a non-empty string");
  }
  return Descriptor{normalized, op_type->get<std::string>()};
}

Result<Descriptor> normalize_descriptor(const nlohmann::json& raw, const VolatileFieldFilter& filter,
                                        const std::string& origin) {
  OPCACHE_TRY(stored_descriptor(raw, origin));
  return stored_descriptor(filter.strip(raw), origin + " (after removing volatile fields)");
}

}  // namespace opcache::store
