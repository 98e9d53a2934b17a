// The state behind opcache::Store (internal to api/).
#pragma once

#include <memory>
#include <string_view>

#include "opcache/opcache.hpp"
#include "store/descriptor.hpp"
#include "store/local_store.hpp"
#include "store/settings.hpp"
#include "store/volatile_fields.hpp"

namespace opcache {

struct Store::Impl {
  std::unique_ptr<store::LocalStore> local;
  store::Settings settings;
  store::VolatileFieldFilter volatile_fields;
  std::int64_t opened_at_ms = 0;  ///< force mode rebuilds entries stored before this

  /// Parses and normalizes a descriptor given as JSON text.
  Result<store::Descriptor> descriptor(std::string_view json_text) const;
};

}  // namespace opcache
